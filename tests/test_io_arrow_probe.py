"""`udm.host.io.arrow_probe.skip_pandas_probe`: after it, pyarrow converts numpy arrays without importing
pandas, and pandas (imported later by anyone) still works with pyarrow both ways. Run in a fresh
interpreter: the probe changes process-wide pyarrow state."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    from udm.host.io.arrow_probe import skip_pandas_probe
    skip_pandas_probe()
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    arr = pa.array(np.arange(5))
    assert arr.to_numpy().tolist() == [0, 1, 2, 3, 4]
    assert pa.chunked_array([arr]).to_numpy().sum() == 10
    assert pc.sum(pc.equal(pa.array(["a", "b"]), "a")).as_py() == 1
    assert "pandas" not in sys.modules, "pandas was imported"
    import pandas as pd
    df = pa.table({"a": [1, 2], "t": pa.array([0, 1], pa.timestamp("s"))}).to_pandas()
    assert df["a"].tolist() == [1, 2] and str(df["t"].dtype).startswith("datetime64")
    assert pa.array(pd.Series([1.5, None])).to_pylist() == [1.5, None]
    assert pa.array(pd.Categorical(["x", "y", "x"])).type.value_type == pa.string()
    assert pa.table(pd.DataFrame({"x": [3]})).column("x").to_pylist() == [3]
    print("ok")
""")


def test_no_pandas_import_and_pandas_still_works_with_pyarrow() -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
