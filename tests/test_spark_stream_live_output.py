"""``udm run --engine spark-streaming``: each micro-batch's output reaches ``--output`` as soon as Spark
commits it (`udm.host.spark.stream_output.LiveOutput`), and exactly once across restarts.

- While a run goes on, its output file already holds the committed micro-batches (it grows, and it is
  never rewritten): watched in a child process, as a user would run it.
- A run killed with SIGKILL (no cleanup at all) at the two worst moments — after a micro-batch's parts are
  written and before Spark commits it, and after a committed batch was appended to the output and before
  that was recorded — and then resumed with the same command writes byte for byte the output and
  dead-letter files of a run that was never interrupted (no line twice, none missing), whose CHT is the
  oracle's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from udm.host.model.plan import bind
from udm.host.model.spec import parse_query
from udm.host.spark.session import default_partitions
from udm.host.spark.stream_output import CRASH_ENV
from udm.host.temporal.elements import parse_element
from udm.host.testing.engine_conformance import write_stream
from udm.host.testing.generator import generate
from udm.host.testing.oracle import oracle_run
from udm.host.testing.verifier import verify

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY = {"steps": [{"op": "window", "window": {"type": "tumbling", "size": 10}, "group_by": ["g"],
                    "udm": "sum", "input": "v"}]}
UDM = str(Path(sys.executable).with_name("udm"))


def _read(path: Path) -> list[Any]:
    return [parse_element(json.loads(x)) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _setup(tmp_path: Path, events: int, seed: int) -> tuple[Path, Path, list[Any]]:
    stream = generate(seed=seed, events=events, groups=3, speculation=0.2, cti="regular", bad=0.03)
    src = tmp_path / "in.jsonl"
    write_stream(src, stream)
    q = tmp_path / "q.json"
    q.write_text(json.dumps(QUERY), encoding="utf-8")
    return src, q, stream


def _cmd(q: Path, src: Path, out: Path, dead: Path, *extra: str) -> list[str]:
    return [UDM, "run", str(q), "-i", str(src), "-o", str(out), "--dead-letter", str(dead),
            "--engine", "spark-streaming", "--master", "local[2]", "--quiet", *extra]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(CRASH_ENV, None)
    return env


def test_output_grows_while_the_run_goes_on(tmp_path: Path) -> None:
    src, q, stream = _setup(tmp_path, events=60, seed=3)
    out, dead = tmp_path / "o.jsonl", tmp_path / "d.jsonl"
    proc = subprocess.Popen(_cmd(q, src, out, dead, "--batch-size", "8"), env=_child_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[bytes] = []
    try:
        while proc.poll() is None:
            if out.exists():
                data = out.read_bytes()
                if not seen or data != seen[-1]:
                    seen.append(data)
            time.sleep(0.05)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    final = out.read_bytes()
    during = [s for s in seen if s and s != final]
    assert len(during) >= 2, f"the output appeared only at the end ({len(seen)} states seen)"
    assert all(final.startswith(s) for s in seen)  # appended to, never rewritten
    verdict = verify(_read(out), oracle_run(bind(parse_query(QUERY)), stream).cht)
    assert verdict, str(verdict)


def _in_process(q: Path, src: Path, out: Path, dead: Path, ck: Path, batch_size: int | None = None,
                buckets: int | None = None) -> None:
    """The run in this process, on the tests' session: a new one with ``buckets``, or a resumed one (which
    keeps the bucket count its checkpoint began with)."""
    from udm.host.model.spec import load_query
    from udm.host.query.runners import RunRequest, get_engine

    get_engine("spark-streaming")(RunRequest(bind(load_query(q)), src, out, dead_letter=dead, checkpoint=ck,
                                             batch_size=batch_size, options={"buckets": buckets} if buckets else {}))


@pytest.fixture(scope="module")
def uninterrupted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The input, query and uninterrupted run both crash points are held to: one run serves both (it is the
    same input, batch size and bucket count; each test only reads its files), which saves a whole
    spark-streaming run. ``k``: the micro-batch the crash hits, one (not the first) that has output elements,
    the worst case to repeat."""
    d = tmp_path_factory.mktemp("uninterrupted")
    src, q, stream = _setup(d, events=50, seed=11)
    ref_out, ref_dead = d / "ref.jsonl", d / "ref.dead.jsonl"
    # (the child's bucket count: the CLI's default on local[2], `default_partitions`; output ids name buckets)
    _in_process(q, src, ref_out, ref_dead, d / "ck-ref", batch_size=7, buckets=default_partitions("local[2]"))
    parts = sorted((d / "ck-ref" / "out").glob("*.jsonl"))
    k = next(int(p.stem) for p in parts[1:] if p.stat().st_size)
    return {"src": src, "q": q, "stream": stream, "out": ref_out.read_bytes(), "dead": ref_dead.read_bytes(), "k": k}


@pytest.mark.parametrize("where", ["write", "deliver"])
def test_killed_and_resumed_run_writes_each_line_once(uninterrupted: dict[str, Any], tmp_path: Path,
                                                       where: str) -> None:
    src, q, stream, k = (uninterrupted[n] for n in ("src", "q", "stream", "k"))
    ck, out, dead = tmp_path / "ck", tmp_path / "o.jsonl", tmp_path / "d.jsonl"
    env = {**_child_env(), CRASH_ENV: f"{where}:{k}"}
    res = subprocess.run(_cmd(q, src, out, dead, "--batch-size", "7", "--checkpoint", str(ck)), env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    record = json.loads((ck / "delivered.json").read_text(encoding="utf-8"))
    if where == "write":  # batch k's parts are written, Spark never committed it, the output stops before it
        assert (ck / "out" / f"{k:08d}.cti").exists() and not (ck / "spark" / "commits" / str(k)).exists()
        assert record["batch"] == k - 1 and out.stat().st_size == record["out_bytes"]
    else:  # batch k is in the output file, but the record still says k - 1
        assert record["batch"] == k - 1 and out.stat().st_size > record["out_bytes"]

    _in_process(q, src, out, dead, ck)  # (the batch size and the bucket count come from the checkpoint)
    assert out.read_bytes() == uninterrupted["out"]
    assert dead.read_bytes() == uninterrupted["dead"]
    verdict = verify(_read(out), oracle_run(bind(parse_query(QUERY)), stream).cht)
    assert verdict, str(verdict)
