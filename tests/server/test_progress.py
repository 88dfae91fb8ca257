"""Progress lines (``hive_lab.progress``) and the online rate estimate per GPU type."""

from __future__ import annotations

import io

import pytest

from hive_lab.reporting import progress, progress_line
from hive_lab_server.timeshare.progress import ProgressTracker, Reading, parse_line
from hive_scheduler.hetero import load_throughputs


def test_progress_prints_the_documented_line(monkeypatch):
    monkeypatch.setenv("HIVE_ATTEMPT", "3")
    monkeypatch.setenv("HIVE_GPU_TYPE", "V100")
    out = io.StringIO()
    progress(1200, t=1732390000.125, file=out)
    assert out.getvalue() == "hive-progress: steps=1200 t=1732390000.125 attempt=3 gpu_type=V100\n"
    assert parse_line(out.getvalue().strip()) == Reading(1200, 1732390000.125, 3, "V100")
    with pytest.raises(ValueError, match="whole number"):
        progress_line(-1)


@pytest.mark.parametrize("line", ["hive-progress: t=1", "hive-progress: steps=x", "progress steps=3",
                                  "hive-progress: steps=-4"])
def test_malformed_lines_are_not_readings(line):
    assert parse_line(line) is None


def feed(tracker, job_id, text, job_type=None, now=0.0):
    data = text.encode()

    def chunk(offset):
        piece = data[offset:offset + 7]  # small chunks: lines split across reads
        return piece, offset + len(piece)

    return tracker.read(job_id, job_type, chunk, now)


def test_rates_per_gpu_type_only_within_one_attempt():
    tracker = ProgressTracker()
    log = ("noise\n"
           "hive-progress: steps=0 t=100 attempt=1 gpu_type=K80\n"
           "hive-progress: steps=10 t=101 attempt=1 gpu_type=K80\n"
           "epoch 1 hive-progress: steps=30 t=103 attempt=1 gpu_type=K80\n"  # after other output on a line
           # paused for an hour, resumed on a V100: the gap is not a rate
           "hive-progress: steps=30 t=3700 attempt=2 gpu_type=V100\n"
           "hive-progress: steps=70 t=3701 attempt=2 gpu_type=V100\n"
           "hive-progress: steps=")  # an unfinished line waits for its end
    p = feed(tracker, "j", log, job_type="ResNet-50 (batch size 64)")
    assert p.steps == 70 and p.gpu_type == "V100"
    assert p.rates["K80"].per_s == pytest.approx(10.0) and p.rates["V100"].per_s == pytest.approx(40.0)
    assert tracker.learned[("ResNet-50 (batch size 64)", "v100")].per_s == pytest.approx(40.0)
    # the rest of the line arrives later
    log += "90 t=3701.5 attempt=2 gpu_type=V100\n"
    p = feed(tracker, "j", log)
    assert p.steps == 90 and p.rates["V100"].per_s == pytest.approx(60 / 1.5)


def test_known_rates_come_from_gavels_file_for_the_declared_type():
    tracker = ProgressTracker(load_throughputs())
    view = tracker.view("j", "ResNet-50 (batch size 64)", 1)
    assert view["steps"] is None and set(view["known_rates"]) == {"k80", "p100", "v100"}
    assert view["known_rates"]["v100"] > view["known_rates"]["k80"]
    assert tracker.view("j", None, 1) is None
    assert tracker.knows_type("ResNet-50 (batch size 64)") and not tracker.knows_type("ResNet-51")


def test_total_gives_remaining_steps_and_an_estimated_finish(monkeypatch):
    monkeypatch.delenv("HIVE_ATTEMPT", raising=False)
    monkeypatch.delenv("HIVE_GPU_TYPE", raising=False)
    out = io.StringIO()
    progress(10, total=100, t=5, file=out)
    assert out.getvalue() == "hive-progress: steps=10 total=100 t=5.000\n"
    with pytest.raises(ValueError):
        progress_line(1, total=-1)
    assert parse_line("hive-progress: steps=10 total=100 t=5") == Reading(10, 5.0, None, None, 100)
    assert parse_line("hive-progress: steps=10 total=x") is None
    assert parse_line("hive-progress: steps=10 total=-3") is None
    tracker = ProgressTracker()
    chunks = [b"hive-progress: steps=0 total=100 t=0 attempt=1 gpu_type=V100\n"
              b"hive-progress: steps=40 t=10 attempt=1 gpu_type=V100\n", b""]
    tracker.read("j", None, lambda off: (chunks.pop(0), off + 100), now=0.0)
    view = tracker.view("j", None, 1)
    assert view["total_steps"] == 100 and view["remaining_steps"] == 60
    assert view["estimated_finish"] == pytest.approx(10 + 60 / 4)
    assert ProgressTracker().view("x", None, 1) is None


def test_job_without_total_has_no_remaining_steps():
    tracker = ProgressTracker()
    chunks = [b"hive-progress: steps=5 t=0 attempt=1 gpu_type=V100\n", b""]
    tracker.read("j", None, lambda off: (chunks.pop(0), off + 100), now=0.0)
    view = tracker.view("j", None, 1)
    assert view["remaining_steps"] is None and view["estimated_finish"] is None
