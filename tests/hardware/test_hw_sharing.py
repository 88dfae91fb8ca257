"""Enforcing shares of a GPU (hardware/sharing.py): modes per GPU type, MIG devices from (fake) NVML,
MPS daemon command lines run for real against a stand-in binary, memory budgets."""

import json
import os
import stat

import pynvml
import pytest

from fixtures.fake_nvml import TOPOLOGIES
from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.hardware.sharing import (
    BudgetWatch, GpuSharing, MigDevice, MpsDaemons, ShareRefused, check_modes, discover,
)


def test_fake_nvml_lists_mig_devices_and_discovery_sizes_them_in_eighths():
    nvml = FakeNvml(TOPOLOGIES["a100-mig"])
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetMigMode(h) == [1, 1] and nvml.nvmlDeviceGetMaxMigDeviceCount(h) == 7
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, 4)
    memory, migs = discover(nvml, "migbox")
    assert memory == {("migbox", 0): 40960}
    assert [(d.uuid[-1], d.eighths) for d in migs[("migbox", 0)]] == [("1", 1), ("2", 1), ("3", 2), ("4", 4)]
    plain = FakeNvml(TOPOLOGIES["single"])
    plain.nvmlInit()
    assert discover(plain, "laptop")[1] == {}


def test_auto_is_mig_where_nvml_lists_devices_and_gives_each_share_its_own():
    nvml = FakeNvml(TOPOLOGIES["a100-mig"])
    nvml.nvmlInit()
    memory, migs = discover(nvml, "migbox")
    sh = GpuSharing({}, gpu_memory_mb=memory, mig_devices=migs, mps_binary="")
    a = sh.grant("j1", "A100", "migbox", 0, 0.125, "GPU-x")
    b = sh.grant("j2", "A100", "migbox", 0, 0.125, "GPU-x")
    q = sh.grant("j3", "A100", "migbox", 0, 0.25, "GPU-x")
    assert (a.mode, a.device, a.memory_budget_mb) == ("mig", "MIG-aaaa0000-0000-0000-0000-000000000001", 4864)
    assert b.device.endswith("2") and q.device.endswith("3") and q.mig_uuid == q.device
    with pytest.raises(ShareRefused, match="no free MIG device of 1/8"):
        sh.grant("j4", "A100", "migbox", 0, 0.125, "GPU-x")
    sh.release("j1")
    assert sh.grant("j4", "A100", "migbox", 0, 0.125, "GPU-x").device.endswith("1")


def test_timeslice_budget_defaults_to_the_share_of_the_gpu_memory():
    sh = GpuSharing({"*": "timeslice"}, gpu_memory_mb={("n", 0): 16000}, mps_binary="")
    g = sh.grant("j", "T4", "n", 0, 0.25, "GPU-1")
    assert (g.mode, g.device, g.memory_budget_mb, g.env) == ("timeslice", "GPU-1", 4000, {})
    assert sh.grant("k", "T4", "n", 0, 0.25, "GPU-1", gpu_memory_mb=1500).memory_budget_mb == 1500


def test_modes_that_forbid_or_cannot_carry_out_shares_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        check_modes({"T4": "fast"})
    sh = GpuSharing({"T4": "none", "V100": "mps"}, mps_binary="")
    with pytest.raises(ShareRefused, match="T4 takes no shares.*ask for whole GPUs"):
        sh.check_request(["T4"], 0.25)
    with pytest.raises(ShareRefused, match="nvidia-cuda-mps-control is not installed"):
        sh.check_request(["V100"], 0.5)
    with pytest.raises(ShareRefused, match=r"name a GPU type that does \(gpu_type: A100\)"):
        sh.check_request(["A100", "T4"], 0.25)
    sh.check_request(["A100"], 0.25)


@pytest.fixture
def mps_binary(tmp_path):
    """A stand-in nvidia-cuda-mps-control recording its argv, env and stdin (a real process is run)."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "nvidia-cuda-mps-control"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "stdin = '' if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()\n"
        f"open({str(log)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], 'stdin': stdin, 'env': "
        "{k: v for k, v in os.environ.items() if k.startswith('CUDA_')}}) + '\\n')\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


def test_mps_daemon_per_shared_gpu_started_once_and_stopped_after_the_last_share(tmp_path, mps_binary):
    binary, log = mps_binary
    sh = GpuSharing({"V100": "mps"}, gpu_memory_mb={("n", 1): 16000}, mps_binary=binary, mps_root=tmp_path / "mps")
    daemons = MpsDaemons(sh)
    g = sh.grant("j1", "V100", "n", 1, 0.25, "GPU-b")
    pipe, logs = str(tmp_path / "mps" / "n-gpu1" / "pipe"), str(tmp_path / "mps" / "n-gpu1" / "log")
    assert g.env == {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": logs,
                     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=4000M"}
    daemons.acquire("n", 1, "GPU-b", "j1")
    daemons.acquire("n", 1, "GPU-b", "j2")
    daemons.release("n", 1, "GPU-b", "j1")
    assert len(log.read_text().splitlines()) == 1  # started once, still in use by j2
    daemons.release("n", 1, "GPU-b", "j2")
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert calls[0] == {"argv": ["-d"], "stdin": "",
                        "env": {"CUDA_VISIBLE_DEVICES": "GPU-b", "CUDA_MPS_PIPE_DIRECTORY": pipe,
                                "CUDA_MPS_LOG_DIRECTORY": logs}}
    assert calls[1] == {"argv": [], "stdin": "quit\n",
                        "env": {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": logs}}
    assert os.path.isdir(pipe) and os.path.isdir(logs)


def test_budget_watch_warns_then_stops_and_forgives_a_job_back_under():
    w = BudgetWatch({"a": 1000, "b": 1000})
    warn, stop = w.check({"a": 1500, "b": 900})
    assert [j for j, _ in warn] == ["a"] and stop == [] and "over its budget of 1000 MB" in warn[0][1]
    warn, stop = w.check({"a": 800, "b": 1200})  # a came back under: forgiven; b warned
    assert [j for j, _ in warn] == ["b"] and stop == []
    warn, stop = w.check({"a": 1100, "b": 1300})
    assert [j for j, _ in warn] == ["a"] and [j for j, _ in stop] == ["b"]
    assert "stopped: its GPU share used 1300 MB" in stop[0][1]


def test_per_process_utilisation_gives_each_share_what_its_own_processes_use():
    """nvmlDeviceGetProcessUtilization (fake NVML): the sampler keeps each process's newest sample,
    asks only for samples newer than the last round's, and reads "none since" (NotFound) as idle."""
    from hive_lab_server.hardware.sampler import GpuSampler, attribute, job_usage

    desc = dict(TOPOLOGIES["single"])
    desc["gpus"] = [dict(desc["gpus"][0], processes=[{"pid": 11, "used_memory_mb": 900, "sm_util": 30},
                                                     {"pid": 12, "used_memory_mb": 100, "sm_util": 5},
                                                     {"pid": 21, "used_memory_mb": 700, "sm_util": 20},
                                                     {"pid": 31, "used_memory_mb": 50}])]
    nvml = FakeNvml(desc)
    sampler = GpuSampler(nvml, "laptop")
    owners = {11: "j-a", 12: "j-a", 21: "j-b", 31: "j-c"}
    (s,) = attribute(sampler.sample(), owners, {("laptop", 0): ["j-a", "j-b", "j-c"]})
    usage = job_usage([s])
    assert {j: (u.process_utilization, u.memory_used_mb) for j, u in usage.items()} == \
        {"j-a": (35, 1000), "j-b": (20, 700), "j-c": (0, 50)}  # j-c's process states none: idle
    first = sampler._util_stamps[0]
    (s,) = attribute(sampler.sample(), owners)
    assert sampler._util_stamps[0] > first  # the next round asks only for newer samples
    assert job_usage([s])["j-a"].process_utilization == 35

    h = nvml.nvmlDeviceGetHandleByIndex(0)
    nvml._gpus[0]["processes"] = [{"pid": 11, "used_memory_mb": 900}]  # no samples since: NotFound
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetProcessUtilization(h, 0)
    (s,) = attribute(sampler.sample(), owners)
    assert job_usage([s])["j-a"].process_utilization == 0
