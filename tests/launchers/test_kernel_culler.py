"""The culler's GPU-utilisation check, on the fake NVML (no GPU on the test machines)."""

from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.kernels.culler import gpu_busy


def test_gpu_utilisation_counts_as_activity():
    nvml = FakeNvml({
        "gpus": [{"model": "NVIDIA A100-SXM4-80GB", "memory_mb": 81920, "uuid": "GPU-idle", "utilization": 0},
                 {"model": "NVIDIA A100-SXM4-80GB", "memory_mb": 81920, "uuid": "GPU-busy", "utilization": 87}],
    })
    assert gpu_busy(["GPU-busy"], nvml) is True
    assert gpu_busy(["GPU-idle"], nvml) is False
    assert gpu_busy(["GPU-idle", "GPU-busy"], nvml) is True
    assert gpu_busy(["GPU-elsewhere"], nvml) is None  # not this machine's: cannot tell
    assert gpu_busy([], nvml) is None
    assert gpu_busy(["GPU-busy"]) is None  # no driver here: the real pynvml cannot tell
