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


def test_an_ended_job_leaves_its_progress_among_the_latest_and_nothing_else():
    from hive_lab_server.timeshare import progress as progress_module

    tracker = ProgressTracker()
    keep = progress_module.KEEP_ENDED
    for i in range(keep + 5):
        feed(tracker, f"j{i}", f"hive-progress: steps={i} t=100 attempt=1 gpu_type=T4\n")
        tracker.read(f"j{i}", None, lambda offset: (b"", offset), 0.0, source="channel")
        tracker.ended(f"j{i}")
    assert len(tracker.ending) == keep  # at most KEEP_ENDED wait for their last read
    for job_id in list(tracker.ending):
        tracker.finish(job_id)
    assert tracker.logs == {} and tracker.jobs == {}
    assert len(tracker.ended_jobs) == keep
    assert tracker.view("j0", None, 1) is None  # the oldest are forgotten
    assert tracker.view(f"j{keep + 4}", None, 1)["steps"] == keep + 4


def test_lines_written_after_the_last_read_count_once_the_job_ended():
    """The last steps of a job (written between the last periodic read and its end) are read once more
    after its end (issue 39: 70 of 90 steps; issue 37: '14 steps of 15; 1 to go' for a succeeded job)."""
    tracker = ProgressTracker()
    log = bytearray(b"hive-progress: steps=1 total=3 t=100 attempt=1 gpu_type=T4\n")

    def chunk(offset):
        return bytes(log[offset:]), len(log)

    tracker.read("j", None, chunk, 0.0)
    log += b"hive-progress: steps=3 total=3 t=102 attempt=1 gpu_type=T4\n"
    tracker.ended("j")
    assert tracker.view("j", None, 1)["steps"] == 1 and "j" in tracker.ending  # not read yet: kept to be read
    tracker.read("j", None, chunk, 0.0)
    tracker.finish("j")
    view = tracker.view("j", None, 1)
    assert view["steps"] == 3 and view["remaining_steps"] == 0
    assert tracker.logs == {} and tracker.jobs == {} and tracker.ending == {}


def test_the_service_keeps_no_progress_state_for_jobs_that_ended(tmp_path):
    """A long-running server read each running job's log for progress and kept where it stopped reading,
    per job, for ever (found by tracemalloc under bench_overload: issue 24's slow RSS creep)."""
    import asyncio
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[3] / "benchmarks" / "service_trace.py"
    spec = importlib.util.spec_from_file_location("service_trace", path)
    trace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trace)

    async def main():
        cfg = trace.load_cluster_config(trace.CLUSTER)
        launcher = trace.ScriptedLauncher()
        now = [1_000_000.0]
        service = trace.HiveService(
            scheduler=trace.OverflowScheduler(trace.Scheduler(cfg)), config=cfg,
            store=trace.Store(f"sqlite:///{tmp_path}/p.sqlite"), launcher=launcher, jobs_root=f"{tmp_path}/jobs",
            poll_interval_s=0.001, clock=lambda: now[0], stop_grace_s=0.0, preemption_grace_s=0.0,
            checkpoint_grace_s=0.0)
        await service.start()
        try:
            for i in range(30):
                now[0] += 1.0
                service.admission.submit(trace.parse_job_spec({"command": "true", "tasks": [{"gpus": 1}]}), "ann", "a")
                await wait_for(lambda: launcher.live)
                service.read_progress_of_running()
                assert service.progress.logs  # it reads the running job's sources
                for job in sorted(launcher.live):
                    launcher.end(job, 0)
                await wait_for(lambda: not service.active)
                service.read_progress_of_running()  # the next periodic read takes the ended job's last lines
            assert service.progress.logs == {} and service.progress.jobs == {} and service.progress.ending == {}
        finally:
            await service.stop()

    async def wait_for(condition):
        for _ in range(5000):
            if condition():
                return
            await asyncio.sleep(0.002)
        raise AssertionError("the service did not get there")

    asyncio.run(main())
