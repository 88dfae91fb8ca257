"""Sampler, job attribution, health rules and Prometheus metrics, driven by scripted fake hardware."""

import os
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fixtures.fake_nvml import topology
from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.hardware.health import HealthEvent, HealthMonitor, HealthRules
from hive_lab_server.hardware.metrics import GpuMetrics
from hive_lab_server.hardware.sampler import GpuSampler, JobResolver, attribute, job_usage


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def make(desc_name="workstation-4", faults=(), **changes):
    desc = topology(desc_name)
    desc["faults"] = list(faults)
    for i, gpu_changes in changes.get("gpus", {}).items():
        desc["gpus"][i].update(gpu_changes)
    clock = Clock()
    nvml = FakeNvml(desc, clock=clock)
    sampler = GpuSampler(nvml, desc["hostname"], clock=clock)
    sampler.open()
    return sampler, clock


def test_sample_readings():
    sampler, clock = make(faults=[{"at": 1, "gpu": 1, "utilization": 87, "memory_used_mb": 2048, "temperature": 71,
                                   "power_w": 250.5, "processes": [{"pid": 11, "used_memory_mb": 2000}]}])
    clock.t = 2
    samples = sampler.sample()
    s = samples[1]
    assert (s.node, s.index, s.readable) == ("ws", 1, True)
    assert (s.utilization, s.memory_used_mb, s.memory_total_mb, s.temperature_c, s.power_w) == (87, 2048, 49140, 71, 250.5)
    assert [(p.pid, p.used_memory_mb) for p in s.processes] == [(11, 2000)]
    assert (s.ecc_corrected, s.ecc_uncorrected, s.remap_pending, s.remap_failure) == (0, 0, False, False)
    assert s.retired_pages_dbe is None  # row-remapping GPU: page retirement not supported, not an error
    assert s.read_errors == []
    assert samples[0].utilization == 0 and samples[0].processes == []
    sampler.close()


def test_consumer_gpu_without_ecc_is_fine():
    sampler, _ = make("single")
    (s,) = sampler.sample()
    assert s.readable and s.ecc_uncorrected is None and s.read_errors == []
    assert HealthMonitor().observe([s]) == []


def test_attribution_by_pid_tree_and_placement():
    # a real process tree: the job's task is a shell whose child is the "GPU process"
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & wait"])
    try:
        for _ in range(100):
            kids = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
            if kids:
                break
            import time

            time.sleep(0.02)
        child = int(kids[0])
        sampler, clock = make(faults=[
            {"at": 0, "gpu": 0, "utilization": 50, "memory_used_mb": 3000, "processes": [{"pid": child, "used_memory_mb": 2500}]},
            {"at": 0, "gpu": 2, "utilization": 70, "memory_used_mb": 1000},
            {"at": 0, "gpu": 3, "processes": [{"pid": os.getpid(), "used_memory_mb": 10}]},
        ])
        samples = attribute(sampler.sample(), JobResolver({proc.pid: "j-1"}), {("ws", 2): ["j-2"], ("ws", 0): ["j-1"]})
    finally:
        proc.kill()
        proc.wait()
    assert [s.jobs for s in samples] == [["j-1"], [], ["j-2"], []]
    assert samples[0].processes[0].job == "j-1"
    assert samples[3].processes[0].job is None  # pytest itself is no job's process
    usage = job_usage(samples)
    assert usage["j-1"].memory_used_mb == 2500 and usage["j-1"].utilization == 50
    assert usage["j-2"].memory_used_mb == 1000 and usage["j-2"].gpus == [("ws", 2)]


def test_job_found_through_process_on_a_gpu_it_was_not_given():
    sampler, _ = make(faults=[{"at": 0, "gpu": 3, "processes": [{"pid": 999999, "used_memory_mb": 5}]}])
    samples = attribute(sampler.sample(), {999999: "j-sneaky"}, {})
    assert samples[3].jobs == ["j-sneaky"]


@pytest.mark.parametrize("fault, reason", [
    ({"xid": 79}, "XID 79 (GPU has fallen off the bus); GPU fell off the bus (NVML: GPU is lost)"),
    ({"xid": 48}, "XID 48 (double-bit ECC error)"),
    ({"xid": 74}, "XID 74 (NVLink error)"),
    ({"lost": True}, "GPU fell off the bus (NVML: GPU is lost)"),
    ({"ecc_uncorrected": 2}, "2 uncorrectable ECC error(s)"),
    ({"remapped_rows": {"uncorrectable": 3, "failure": 1}}, "row remapping failed (the GPU needs repair)"),
    ({"remapped_rows": {"uncorrectable": 1, "pending": 1}}, "row remapping pending (the GPU needs a reset)"),
])
def test_health_rules(fault, reason):
    sampler, clock = make(faults=[{"at": 5, "gpu": 2, **fault}])
    monitor = HealthMonitor()
    assert monitor.observe(sampler.sample()) == []
    clock.t = 6
    events = monitor.observe(sampler.sample())
    assert events == [HealthEvent("ws", 2, False, reason)]
    assert monitor.observe(sampler.sample()) == []  # reported once
    assert monitor.bad() == {("ws", 2): reason}


def test_retired_pages_on_older_gpus():
    sampler, clock = make("dgx1", faults=[{"at": 1, "gpu": 0, "retired_pages": {"dbe": 2, "pending": 1}},
                                          {"at": 2, "gpu": 1, "retired_pages": {"sbe": 58, "dbe": 2}}],
                          gpus={0: {"row_remapping": False}, 1: {"row_remapping": False}})
    monitor = HealthMonitor()
    assert monitor.observe(sampler.sample()) == []
    clock.t = 3
    events = monitor.observe(sampler.sample())
    assert events == [HealthEvent("dgx1", 0, False, "page retirement pending (the GPU needs a reset)"),
                      HealthEvent("dgx1", 1, False, "60 memory pages retired (limit 60)")]


def test_benign_xid_and_nvml_error_streak():
    sampler, clock = make(faults=[{"at": 1, "gpu": 0, "xid": 13}, {"at": 1, "gpu": 1, "error": "Unknown"}])
    monitor = HealthMonitor(HealthRules(nvml_error_streak=3))
    clock.t = 1
    assert monitor.observe(sampler.sample()) == []  # XID 13 is the program's fault, not the GPU's
    assert monitor.observe(sampler.sample()) == []
    (event,) = monitor.observe(sampler.sample())
    assert event == HealthEvent("ws", 1, False, "NVML cannot read the GPU (Unknown Error) in 3 samples in a row")


def test_bad_until_marked_healthy():
    sampler, clock = make(faults=[{"at": 1, "gpu": 3, "ecc_uncorrected": 1}, {"at": 5, "gpu": 3, "ecc_uncorrected": 1}])
    monitor = HealthMonitor()
    clock.t = 1
    assert len(monitor.observe(sampler.sample())) == 1
    clock.t = 2
    assert monitor.observe(sampler.sample()) == []
    assert monitor.mark_healthy("ws", 3) == HealthEvent("ws", 3, True, "marked healthy by an admin")
    assert monitor.observe(sampler.sample()) == []  # the old errors are the new baseline
    clock.t = 5
    assert monitor.observe(sampler.sample()) == [HealthEvent("ws", 3, False, "1 uncorrectable ECC error(s)")]


def test_uncorrected_errors_before_start():
    sampler, _ = make(gpus={0: {"ecc_uncorrected": 4}})
    assert HealthMonitor().observe(sampler.sample())[0].reason == "4 uncorrectable ECC error(s)"
    sampler, _ = make(gpus={0: {"ecc_uncorrected": 4}})
    assert HealthMonitor(HealthRules(uncorrected_ecc_at_start_is_bad=False)).observe(sampler.sample()) == []


def test_lost_gpu_comes_back_with_a_fresh_handle():
    sampler, clock = make(faults=[{"at": 1, "gpu": 0, "lost": True}, {"at": 2, "gpu": 0, "recover": True}])
    clock.t = 1
    assert sampler.sample()[0].lost
    clock.t = 2
    s = sampler.sample()[0]
    assert s.readable and s.uuid


def metrics_text(registry):
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }


def test_metrics_values():
    sampler, clock = make(faults=[
        {"at": 1, "gpu": 1, "utilization": 87, "memory_used_mb": 2048, "temperature": 71, "power_w": 250.5},
        {"at": 1, "gpu": 2, "xid": 79},
        {"at": 1, "gpu": 0, "remapped_rows": {"correctable": 2}},
    ])
    registry = CollectorRegistry()
    metrics = GpuMetrics(registry)
    metrics.set_inventory({("ws", i): {"uuid": f"GPU-{i}", "type": "A6000", "model": "NVIDIA RTX A6000"} for i in range(4)})
    clock.t = 1
    monitor = HealthMonitor()
    samples = attribute(sampler.sample(), None, {("ws", 1): ["j-7"]})
    monitor.observe(samples)
    metrics.update(samples, bad=monitor.bad(), drained={("ws", 3)}, jobs=job_usage(samples),
                   job_labels={"j-7": {"user": "ann", "vc": "default"}}, seconds=0.01)
    m = metrics_text(registry)
    g1 = (("gpu", "1"), ("node", "ws"))
    g2 = (("gpu", "2"), ("node", "ws"))
    assert m[("hive_lab_gpu_utilization_percent", g1)] == 87
    assert m[("hive_lab_gpu_memory_used_bytes", g1)] == 2048 * 1024 * 1024
    assert m[("hive_lab_gpu_temperature_celsius", g1)] == 71
    assert m[("hive_lab_gpu_power_watts", g1)] == 250.5
    assert m[("hive_lab_gpu_up", g2)] == 0 and m[("hive_lab_gpu_up", g1)] == 1
    assert ("hive_lab_gpu_utilization_percent", g2) not in m  # no made-up readings for a lost GPU
    assert m[("hive_lab_gpu_healthy", g2)] == 0 and m[("hive_lab_gpu_healthy", g1)] == 1
    assert m[("hive_lab_gpu_drained", (("gpu", "3"), ("node", "ws")))] == 1
    assert m[("hive_lab_gpu_xid_errors_total", (("gpu", "2"), ("node", "ws"), ("xid", "79")))] == 1
    assert m[("hive_lab_gpu_remapped_rows", (("gpu", "0"), ("kind", "correctable"), ("node", "ws")))] == 2
    assert m[("hive_lab_gpu_ecc_errors", (("gpu", "0"), ("kind", "uncorrected"), ("node", "ws")))] == 0
    assert m[("hive_lab_gpu_info", (("gpu", "1"), ("model", "NVIDIA RTX A6000"), ("node", "ws"), ("type", "A6000"), ("uuid", "GPU-1")))] == 1
    job = (("job", "j-7"), ("user", "ann"), ("vc", "default"))
    assert m[("hive_lab_job_gpu_utilization_percent", job)] == 87
    assert m[("hive_lab_job_gpus", job)] == 1
    assert m[("hive_lab_gpu_sample_duration_seconds", ())] == 0.01
    # the job ends: its series go away instead of going stale
    metrics.update(attribute(sampler.sample(), None, {}), jobs={})
    assert not any(name.startswith("hive_lab_job_") for name, _ in metrics_text(registry))


def test_capture_script_without_nvml_says_so():
    out = subprocess.run([sys.executable, "-m", "hive_lab_server.hardware.capture", "--backend", "none"],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "NVML is not available" in out.stderr


def _fake_proc(root, pid, ppid, cgroup="0::/user.slice\n"):
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} (python3 (x) y) S {ppid} 1 1 0 -1 4194560\n")
    (d / "cgroup").write_text(cgroup)


def test_job_resolver_pid_ancestry_and_containers(tmp_path):
    cid = "ab" * 32
    _fake_proc(tmp_path, 100, 1)
    _fake_proc(tmp_path, 200, 100)  # a child of the task's process
    _fake_proc(tmp_path, 300, 250)  # parent unknown, in a container
    (tmp_path / "300" / "cgroup").write_text(f"0::/system.slice/docker-{cid}.scope\n")
    _fake_proc(tmp_path, 400, 1)
    resolve = JobResolver({100: "j-local"}, {cid[:12]: "j-docker"}, proc=str(tmp_path))
    assert [resolve(p) for p in (100, 200, 300, 400, 999)] == ["j-local", "j-local", "j-docker", None, None]


def test_gpu_lost_before_the_sampler_starts():
    sampler, _ = make(faults=[{"at": 0, "gpu": 2, "lost": True}])
    samples = sampler.sample()
    assert [s.lost for s in samples] == [False, False, True, False]
    assert HealthMonitor().observe(samples)[0].gpu == 2
