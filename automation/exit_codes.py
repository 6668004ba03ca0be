"""Exit codes of ``python -m automation``: scripts and CI branch on these."""

OK = 0
#: The operation failed, or the policy pack reported a mandatory violation.
FAILED = 1
#: Bad command line or bad stack settings: nothing was run.
USAGE = 2
