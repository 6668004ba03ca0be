"""Reserved GPU capacity: Capacity Blocks for ML and On-Demand Capacity Reservations (docs/reserved-capacity.md).

A reservation is always in one Availability Zone, for one instance type and a number of instances;
a Capacity Block also ends on a date, when EC2 reclaims its instances. Which pool may use it is
decided where it is set (``gpuPools[].reservation``, ``karpenter.nodeClasses[].capacityReservations``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_validator, model_validator

from components import contract
from components.settings._base import AWS_REGIONS, _check_known_types, _Model, keyed
from policies.capacity.cost import Reservation

#: EC2 capacity reservation ids: ``cr-`` and 17 lowercase hexadecimal digits (EC2 API reference,
#: ``CapacityReservation.CapacityReservationId``; reservations came after EC2's move to 17-digit ids).
#: Karpenter's EC2NodeClass CRD (1.14.1, ``capacityReservationSelectorTerms[].id``) is looser
#: (``^cr-[0-9a-z]+$``) and would take an id no reservation has, which then selects nothing.
RESERVATION_ID_RE = re.compile(r"^cr-[0-9a-f]{17}$")
#: An Availability Zone name: its region's name and one letter (``us-east-1a``). Zone ids (``use1-az1``)
#: are account-independent but EC2 reports a reservation's ``AvailabilityZone`` by name.
_ZONE_RE = re.compile(r"^([a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d)([a-z])$")


def zone_region(zone: str) -> str:
    """The region of an Availability Zone name (``us-east-1a`` -> ``us-east-1``)."""
    match = _ZONE_RE.match(zone)
    return match.group(1) if match else ""


class CapacityReservation(_Model):
    """One EC2 capacity reservation, with what it holds, so the check can count and date it."""

    id: str = Field(description="The reservation's id: cr- and 17 lowercase hexadecimal digits.")
    type: contract.ReservationType = Field(
        default=contract.RESERVATION_ODCR,
        description="`capacity-block` (a Capacity Block for ML) or `default` (an On-Demand Capacity Reservation).",
    )
    availability_zone: str = Field(
        description="The Availability Zone name the reservation is in, such as us-east-1a.",
    )
    instance_type: str = Field(description="The instance type the reservation holds.")
    instance_count: int = Field(
        ge=1, le=1000, description="How many instances the reservation holds. Unit: instances.",
    )
    end_date: datetime | None = Field(
        default=None,
        description="When EC2 reclaims a Capacity Block's instances: an ISO 8601 date-time in UTC, such as "
        "2026-12-01T11:30:00Z; required for capacity-block (default unset).",
    )

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not RESERVATION_ID_RE.match(value):
            raise ValueError(f"{value[:40]!r} is not a capacity reservation id such as cr-0123456789abcdef0 "
                             "(cr- and 17 lowercase hexadecimal digits, as EC2 writes them)")
        return value

    @field_validator("availability_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        region = zone_region(value)
        if region not in AWS_REGIONS:
            raise ValueError(f"{value[:40]!r} is not an Availability Zone name such as us-east-1a (a region and a "
                             "letter)")
        return value

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str) -> str:
        _check_known_types([value])
        return value

    @field_validator("end_date", mode="before")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        if not isinstance(value, (str, datetime)) and value is not None:
            # pydantic would read a number as Unix seconds: 1767225600 is a date nobody wrote.
            raise ValueError(f"{str(value)[:40]!r} is not an ISO 8601 date-time such as 2026-12-01T11:30:00Z "
                             "(a number is not read as a date)")
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value[:40]!r} is not an ISO 8601 date-time such as 2026-12-01T11:30:00Z") from None
            value = parsed
        if isinstance(value, datetime) and (value.tzinfo is None or value.utcoffset() != UTC.utcoffset(None)):
            raise ValueError(f"{value.isoformat()!r} must be UTC (end it with Z), as EC2 reports a block's end")
        return value

    @model_validator(mode="after")
    def _end_of_block(self) -> CapacityReservation:
        if self.type == contract.RESERVATION_CAPACITY_BLOCK and self.end_date is None:
            raise keyed("a capacity-block reservation needs its endDate (ISO 8601, UTC, e.g. 2026-12-01T11:30:00Z): "
                        "EC2 reclaims the block's instances then", "endDate")
        return self

    @property
    def region(self) -> str:
        return zone_region(self.availability_zone)

    @property
    def end_text(self) -> str | None:
        return None if self.end_date is None else self.end_date.strftime("%Y-%m-%dT%H:%M:%SZ")

    def record(self) -> Reservation:
        """The reservation as the plan records it for the pack and the report (``policies.capacity.cost``)."""
        return Reservation(self.id, self.type, self.instance_type, self.instance_count, self.availability_zone,
                           self.end_text)
