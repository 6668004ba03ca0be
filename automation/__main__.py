"""``python -m automation``: run one verb and exit with its code."""

import faulthandler
import gc

# A crash inside a C extension (a signal handled mid-import, say) then prints where every thread
# was, on stderr, instead of a bare exit status -11.
faulthandler.enable()

from automation.cli import main  # noqa: E402 - after the crash handler, so imports are covered

code = main()
# The heap (every SDK type, and after a check every registered resource) is frozen before the
# interpreter tears down: its final collections would otherwise walk all of it, 0.7 s of a 2.2 s
# prod check. Frozen objects are still released by reference counting; only the collector's
# scans are skipped, and the process's memory goes back to the system at exit anyway.
gc.freeze()
raise SystemExit(code)
