"""InterruptionQueue: the SQS queue Karpenter reads to drain nodes before EC2 takes them away."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

TYPE = "llm-platform:index:InterruptionQueue"

#: EventBridge rules feeding the queue: name -> event pattern.
INTERRUPTION_EVENTS: dict[str, dict[str, list[str]]] = {
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "capacity-reservation": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}


def queue_policy(queue_arn: str) -> str:
    """Only EventBridge (and SQS itself) may send; anything over plain HTTP is denied."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Id": "EC2InterruptionPolicy",
            "Statement": [
                {
                    "Sid": "AllowEventBridge",
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": queue_arn,
                },
                {
                    "Sid": "DenyHTTP",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "sqs:*",
                    "Resource": queue_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
            ],
        }
    )


@dataclass(frozen=True)
class InterruptionQueueArgs:
    """Inputs of :class:`InterruptionQueue`. ``queue_name`` is what Karpenter's
    ``settings.interruptionQueue`` names (conventionally the cluster name)."""

    queue_name: str
    tags: dict[str, str] = field(default_factory=dict)


class InterruptionQueue(pulumi.ComponentResource):
    """SQS queue (300 s retention, SSE, TLS-only) with an EventBridge rule and target per event kind."""

    queue_name: pulumi.Output[str]
    queue_arn: pulumi.Output[str]

    def __init__(self, name: str, args: InterruptionQueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        queue = aws.sqs.Queue(
            f"{name}-queue",
            name=args.queue_name,
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            tags=args.tags,
            opts=child,
        )
        aws.sqs.QueuePolicy(f"{name}-policy", queue_url=queue.url, policy=queue.arn.apply(queue_policy), opts=child)
        for event, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{event}",
                description=f"Karpenter interruption handling: {pattern['detail-type'][0]}",
                event_pattern=json.dumps(pattern),
                tags=args.tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{event}", rule=rule.name, target_id="KarpenterInterruptionQueueTarget", arn=queue.arn, opts=child
            )
        self.queue_name = queue.name
        self.queue_arn = queue.arn
        self.register_outputs({"queue_name": self.queue_name, "queue_arn": self.queue_arn})
