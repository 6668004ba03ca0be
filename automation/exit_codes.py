"""Exit codes of ``python -m automation``: scripts and CI branch on these.

Distinct outcomes get distinct codes, so a script can tell "retry later" (locked) from "fix the
command" (usage) from "it does not exist" (not found) from "someone pressed Ctrl-C".
"""

import signal

OK = 0
#: The operation failed, a post-deploy check failed, or the policy pack reported a mandatory violation.
FAILED = 1
#: Bad command line, bad flag value or bad stack settings: nothing was run.
USAGE = 2
#: The stack is locked by another update (or by a dead one: see ``python -m automation unlock``).
LOCKED = 3
#: The stack or environment does not exist in the backend.
NOT_FOUND = 4
#: Preflight found this machine unable to run the operation (missing tool, credentials, backend).
PREFLIGHT = 5
#: The verb did what it could here and lists what is left, each with the command that finishes it
#: elsewhere (``images resolve``: some images unresolved, the others' digests written).
INCOMPLETE = 6
#: ``versions outdated``: every source answered and at least one pin is behind its newest version.
OUTDATED = 7
#: ``check``: every policy ran and none failed, but the catalog has no prices for the stack's region,
#: so the GPU budget is unknown; the summary names the one command that fills it
#: (``python -m automation catalog refresh --region R``).
BUDGET_UNKNOWN = 8
#: Interrupted by SIGINT (Ctrl-C): 128 + 2, as shells report it.
INTERRUPTED = 128 + signal.SIGINT
#: Interrupted by SIGTERM (CI timeouts, ``kill``): 128 + 15.
TERMINATED = 128 + signal.SIGTERM


def interrupted(signum: int) -> int:
    """The exit code for a run stopped by ``signum``."""
    return TERMINATED if signum == signal.SIGTERM else INTERRUPTED
