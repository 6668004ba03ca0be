"""The platform's program with the capacity verdict left out: it builds what the settings describe even
where the capacity model finds them infeasible, so a test can hold the settings' view of an infeasible
stack against the plan the program records for it (``record_plan(..., program=UNJUDGED_PROGRAM)``)."""

from pathlib import Path

import pulumi

from components.capacity_check import CheckedStack
from components.platform import Platform
from components.settings import read_settings

UNJUDGED_PROGRAM = Path(__file__)

if __name__ == "__main__":
    read = read_settings(pulumi.runtime.get_config_env())
    assert read.settings is not None and not read.problems, read.problems
    Platform("llm-platform", CheckedStack.of(read.settings))
