"""``python -m bench._udm_child ARGS...`` = ``udm ARGS...`` (the same `main()` the console script calls),
then the process's own peak RSS on stderr as ``UDM_BENCH_VMHWM_KB=<n>``.

Peak RSS is read from /proc/self/status (VmHWM) rather than from the parent's wait4 rusage: on Linux a
child's ``ru_maxrss`` also counts the parent's memory at spawn time (the exec'd image inherits the
pre-exec high-water mark), which would make every run look as big as the benchmark driver.
"""

from __future__ import annotations

import atexit
import sys


def _report() -> None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    sys.stderr.write(f"\nUDM_BENCH_VMHWM_KB={int(line.split()[1])}\n")
                    sys.stderr.flush()
                    return
    except OSError:
        pass


if __name__ == "__main__":
    atexit.register(_report)
    from udm.host.cli.app import main

    sys.argv = ["udm", *sys.argv[1:]]
    main()
