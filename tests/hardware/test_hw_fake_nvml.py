"""The fake NVML speaks pynvml's API: same names, parameters, structures and error classes."""

import inspect

import pynvml
import pytest

from fixtures.fake_nvml import add_fault, topology
from hive_lab_server.hardware import fake_nvml
from hive_lab_server.hardware.fake_nvml import DescriptionError, FakeNvml
from hive_lab_server.hardware.nvml_backend import BackendError, load_backend, normalize_bus_id

PYNVML_FUNCTIONS = sorted(n for n in dir(FakeNvml) if n.startswith("nvml") and hasattr(pynvml, n))


def test_fake_covers_every_call_the_package_makes():
    import hive_lab_server.hardware as hw

    listed = {w.strip(" ,.\n") for w in hw.__doc__.split("used, all of them:")[1].split()}
    assert listed <= set(PYNVML_FUNCTIONS)


@pytest.mark.parametrize("name", PYNVML_FUNCTIONS)
def test_same_signature_as_pynvml(name):
    real = inspect.signature(inspect.unwrap(getattr(pynvml, name)))
    fake = inspect.signature(getattr(FakeNvml({"gpus": []}), name))
    assert list(fake.parameters) == list(real.parameters), name


def test_constants_and_errors_are_pynvml_s():
    assert fake_nvml.NVML_TOPOLOGY_SINGLE == pynvml.NVML_TOPOLOGY_SINGLE == 10
    assert fake_nvml.NVML_TOPOLOGY_SYSTEM == 50
    assert fake_nvml.nvmlEventTypeXidCriticalError == pynvml.nvmlEventTypeXidCriticalError
    assert fake_nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost


def test_structures_and_values():
    nvml = FakeNvml(topology("dgx1"))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(3)
    assert nvml.nvmlDeviceGetName(h) == "Tesla V100-SXM2-16GB"
    mem = nvml.nvmlDeviceGetMemoryInfo(h)
    assert isinstance(mem, pynvml.c_nvmlMemory_t) and mem.total == 16384 * 1024 * 1024 and mem.used == 0
    pci = nvml.nvmlDeviceGetPciInfo(h)
    assert isinstance(pci, pynvml.nvmlPciInfo_t)  # the very ctypes structure real NVML fills
    assert normalize_bus_id(pci.busId) == "0000:37:00.0"
    h0 = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetTopologyCommonAncestor(h0, nvml.nvmlDeviceGetHandleByIndex(1)) == pynvml.NVML_TOPOLOGY_SINGLE
    assert nvml.nvmlDeviceGetTopologyCommonAncestor(h0, h) == pynvml.NVML_TOPOLOGY_HOSTBRIDGE
    assert nvml.nvmlDeviceGetTopologyCommonAncestor(h0, nvml.nvmlDeviceGetHandleByIndex(7)) == pynvml.NVML_TOPOLOGY_SYSTEM
    near = nvml.nvmlDeviceGetTopologyNearestGpus(h0, pynvml.NVML_TOPOLOGY_HOSTBRIDGE)
    assert sorted(x.index for x in near) == [1, 2, 3]
    assert nvml.nvmlDeviceGetNvLinkState(h0, 0) == pynvml.NVML_FEATURE_ENABLED
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetNvLinkState(h0, 3)  # GPU 0 has 3 links in the cube mesh
    util = nvml.nvmlDeviceGetUtilizationRates(h)
    assert isinstance(util, pynvml.c_nvmlUtilization_t) and util.gpu == 0
    assert nvml.nvmlDeviceGetPowerUsage(h) == 60000  # milliwatts
    with pytest.raises(pynvml.NVMLError_NotSupported):  # V100-era fake defaults to row remapping
        nvml.nvmlDeviceGetRetiredPages(h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    assert nvml.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(nvml.nvmlEventSetCreate(), 0)
    nvml.nvmlShutdown()


def test_scripted_faults_follow_the_clock():
    t = [0.0]
    desc = topology("workstation-4")
    desc["faults"] = [
        {"at": 5, "gpu": 2, "xid": 79},
        {"at": 3, "gpu": 1, "utilization": 90, "processes": [{"pid": 4242, "used_memory_mb": 1000}]},
        {"at": 10, "gpu": 1, "ecc_uncorrected": 2},
        {"at": 12, "gpu": 0, "error": "Unknown"},
    ]
    nvml = FakeNvml(desc, clock=lambda: t[0])
    nvml.nvmlInit()
    events = nvml.nvmlEventSetCreate()
    for i in range(4):
        nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(i), pynvml.nvmlEventTypeXidCriticalError, events)
    h1, h2 = nvml.nvmlDeviceGetHandleByIndex(1), nvml.nvmlDeviceGetHandleByIndex(2)
    assert nvml.nvmlDeviceGetUtilizationRates(h1).gpu == 0
    t[0] = 4
    assert nvml.nvmlDeviceGetUtilizationRates(h1).gpu == 90
    assert [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h1)] == [4242]
    t[0] = 5
    data = nvml.nvmlEventSetWait(events, 0)
    assert (data.eventType, data.eventData, data.device.index) == (pynvml.nvmlEventTypeXidCriticalError, 79, 2)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(events, 0)  # each event once
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetMemoryInfo(h2)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(2)
    unc = (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
    assert nvml.nvmlDeviceGetTotalEccErrors(h1, *unc) == 0
    t[0] = 10
    assert nvml.nvmlDeviceGetTotalEccErrors(h1, *unc) == 2
    t[0] = 12
    with pytest.raises(pynvml.NVMLError_Unknown):
        nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(0))


def test_faults_file_is_reread(fake_hardware):
    path = fake_hardware("workstation-4")
    nvml = load_backend(f"fake:{path}")
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 35
    add_fault(path, {"at": 0, "gpu": 1, "temperature": 91})
    assert nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 91


@pytest.mark.parametrize("desc, message", [
    ({"gpus": {}}, "gpus: expected a list"),
    ({"gpus": [{"memory_mb": 10}]}, "gpus[0].model"),
    ({"gpus": [{"model": "x"}], "nvlink": [[0, 3]]}, "nvlink[0]"),
    ({"gpus": [{"model": "x"}], "faults": [{"at": 1, "gpu": 4, "xid": 79}]}, "faults[0].gpu"),
    ({"gpus": [{"model": "x"}], "faults": [{"at": 1, "gpu": 0, "error": "Nope"}]}, "faults[].error"),
])
def test_bad_descriptions_say_what_to_fix(desc, message):
    with pytest.raises(DescriptionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        FakeNvml(desc)


def test_backend_specs(tmp_path):
    assert load_backend("auto") is pynvml
    assert load_backend("none") is None
    with pytest.raises(BackendError, match="fake:/path"):
        load_backend("bogus")
    with pytest.raises(DescriptionError, match="does not exist"):
        load_backend(f"fake:{tmp_path}/missing.yaml")
