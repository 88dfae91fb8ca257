"""benchmarks/rfold_philly.py: RFold's flattened Philly CSV into the simulator's trace schema, tested on a
small file written here in RFold's format (the real 111,549-row file is not on this machine)."""

from __future__ import annotations

import csv
import importlib.util
import io
import pathlib
import subprocess
import sys

import pytest

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import load_trace, simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]

# RFold's WorkloadGen/data/philly_trace.csv as it is laid out: a '#' header, then
# id, arrival second, topology, shape (GPUs per server), size, duration seconds
SAMPLE = """\
#job id,arrival time (sec),topology,shape,size,duration (sec)
1,0.0,CLOS,1,1,3599.6
2,15.0,CLOS,4+4,8,120.0
3,15.0,CLOS,2,2,0.0
4,40.0,CLOS,0,0,300.0
5,100.0,CLOS,8+8,16,86400.0
6,4320000.0,CLOS,1,1,0.3
7,4320005.0,CLOS,2+2+2+2,8,61.0
8,4320005.0,CLOS,1,1,7.0
"""


def converter():
    spec = importlib.util.spec_from_file_location("rfold_philly", ROOT / "benchmarks" / "rfold_philly.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_whole_file_as_philly_dev_was_made():
    out = io.StringIO()
    counts = converter().convert(io.StringIO(SAMPLE), out)
    assert counts == {"read": 8, "dropped": 2, "before": 0, "written": 6}  # size 0 and duration 0 dropped
    got = rows(out.getvalue())
    assert list(got[0]) == ["job_id", "submit_time_s", "duration_s", "num_gpus", "gpu_type", "vc", "user", "status"]
    assert [(r["job_id"], r["submit_time_s"], r["duration_s"], r["num_gpus"]) for r in got] == [
        ("1", "0", "3600", "1"), ("2", "15", "120", "8"), ("5", "100", "86400", "16"),
        ("6", "4320000", "1", "1"),  # a 0.3 s job keeps a whole second (the schema wants > 0)
        ("7", "4320005", "61", "8"), ("8", "4320005", "7", "1"),  # a tie keeps file order
    ]
    assert all(r["gpu_type"] == r["vc"] == r["user"] == r["status"] == "" for r in got)


def test_a_window_from_a_second_on_starts_at_zero():
    out = io.StringIO()
    counts = converter().convert(io.StringIO(SAMPLE), out, after=4_320_000, jobs=2)
    assert counts == {"read": 8, "dropped": 2, "before": 3, "written": 2}
    assert [(r["job_id"], r["submit_time_s"]) for r in rows(out.getvalue())] == [("6", "0"), ("7", "5")]


def test_the_converted_trace_replays_on_the_philly_model(tmp_path):
    path = tmp_path / "philly.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        converter().convert(io.StringIO(SAMPLE), fh)
    config = load_cluster_config("philly")
    events = load_trace(path, config)
    shapes = {e.job: [(t.count, t.gpus) for t in e.tasks] for e in events}
    assert shapes["2"] == [(1, 8)] and shapes["5"] == [(2, 8)]  # 16 GPUs: two whole 8-GPU nodes
    result = simulate(config, events, "hived")
    assert result.metrics.finished == 6 and result.metrics.rejected == 0


@pytest.mark.parametrize("line, says", [
    ("9,10.0,CLOS,1,1", "line 10: expected 6 fields"),
    ("9,ten,CLOS,1,1,5.0", "line 10: arrival, size and duration must be numbers"),
    ("1,200.0,CLOS,1,1,5.0", "line 10: job id '1' already appeared on line 2"),
])
def test_a_malformed_row_stops_the_command_with_its_line(tmp_path, line, says):
    src = tmp_path / "bad.csv"
    src.write_text(SAMPLE + line + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rfold_philly.py"), str(src),
                          "--out", str(tmp_path / "t.csv")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and says in out.stderr, out.stderr


def test_the_command_reports_what_it_kept(tmp_path):
    src = tmp_path / "philly_trace.csv"
    src.write_text(SAMPLE, encoding="utf-8")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rfold_philly.py"), str(src),
                          "--out", str(tmp_path / "t.csv")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "8 jobs read, 2 dropped (size < 1 or duration <= 0), 0 before second 0, 6 written" in out.stderr
    assert len(rows((tmp_path / "t.csv").read_text())) == 6
