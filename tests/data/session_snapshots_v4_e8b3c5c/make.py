"""Writes the old snapshots `tests/test_session_old_snapshots.py` restores, with an earlier udmkit's engine:

    git archive e8b3c5c | tar -x -C /tmp/old
    python tests/data/session_snapshots_v4_e8b3c5c/make.py /tmp/old

run by the Python of an editable install of this checkout: the `udm` package is pointed at TREE before it is
imported (as bench/bench_before_after.py does), and the stream and query come from the test module.
"""

import sys
from pathlib import Path

tree = Path(sys.argv.pop(1)).resolve()
finders = [sys.modules.get(getattr(f, "__module__", "")) for f in sys.meta_path]
finders = [m for m in finders if m is not None and getattr(m, "MAPPING", None)]
roots = {Path(m.MAPPING["udm"]).parent for m in finders if "udm" in m.MAPPING}
for mod in finders:
    for name, path in list(mod.MAPPING.items()):
        root = next((r for r in roots if Path(path).is_relative_to(r)), None)
        if root is not None:
            mod.MAPPING[name] = str(tree / Path(path).relative_to(root))

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent.parent))
from test_session_old_snapshots import CASES, CUT, N, _feed, _query, _stream  # noqa: E402

from udm.host.engine import QueryRunner  # noqa: E402

for gap, udm, seed, groups in CASES:
    r = QueryRunner(_query(gap, udm))
    _feed(r, _stream(seed, N, groups), 0, CUT)
    (here / f"session_{udm}_{gap}_{seed}.snap").write_bytes(r.snapshot())
