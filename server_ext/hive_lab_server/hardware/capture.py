"""Record what a real NVML answers, as a fixture the fake backend replays.

Run on a machine with NVIDIA GPUs::

    python -m hive_lab_server.hardware.capture -o tests/fixtures/nvml_real/<machine>.json

The file holds every answer the inventory and the sampler use (names, memory, PCI bus ids, the
common-ancestor matrix, NUMA nodes, CPU affinity, NVLink remote bus ids, readings, ECC/retirement
state, which calls were not supported), plus what discovery and one sampling round made of them.
``FakeNvml(path)`` replays it; ``tests/hardware/test_capture_replay.py`` checks that discovery on the
replay gives the recorded result, so the fake is checked against real answers.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import socket
import sys
from typing import Any

import pynvml

from hive_lab_server.hardware.fake_nvml import CAPTURE_FORMAT
from hive_lab_server.hardware.inventory import _host_resources, build_cluster_config, discover_node
from hive_lab_server.hardware.nvml_backend import NVMLError, load_backend, nvml_session, text
from hive_lab_server.hardware.sampler import GpuSampler


def _ask(answers: dict, errors: dict, key: str, call):
    try:
        answers[key] = call()
        return answers[key]
    except NVMLError as exc:
        errors[key] = {"code": getattr(exc, "value", None), "error": str(exc)}
        return None


def capture(nvml: Any, node: str | None = None) -> dict:
    """Everything the fake needs to replay this machine (NVML must be initialised)."""
    cpus, memory_mb = _host_resources(nvml)
    errors: dict[str, dict] = {}
    gpus = []
    handles = []
    for index in range(nvml.nvmlDeviceGetCount()):
        g: dict[str, Any] = {}
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        handles.append(h)
        e = {}
        g["model"] = text(nvml.nvmlDeviceGetName(h))
        g["uuid"] = text(nvml.nvmlDeviceGetUUID(h))
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        g["memory_mb"] = int(mem.total // (1024 * 1024))
        g["memory_used_mb"] = int(mem.used // (1024 * 1024))
        g["pci_bus_id"] = text(nvml.nvmlDeviceGetPciInfo(h).busId)
        g["numa_node"] = _ask(g, e, "numa_node", lambda: nvml.nvmlDeviceGetNumaNodeId(h))
        words = _ask({}, e, "cpu_affinity", lambda: nvml.nvmlDeviceGetCpuAffinity(h, max(1, (cpus + 63) // 64)))
        g["cpu_affinity"] = None if words is None else [int(w) for w in words]
        remote = {}
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED:
                    remote[str(link)] = text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId)
            except NVMLError:
                continue
        g["nvlink_remote"] = remote
        util = _ask({}, e, "utilization", lambda: nvml.nvmlDeviceGetUtilizationRates(h))
        g["utilization"], g["memory_util"] = (0, 0) if util is None else (int(util.gpu), int(util.memory))
        g["temperature"] = _ask({}, e, "temperature", lambda: nvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)) or 0
        power = _ask({}, e, "power", lambda: nvml.nvmlDeviceGetPowerUsage(h))
        g["power_w"] = 0 if power is None else power / 1000.0
        unc = _ask({}, e, "ecc_uncorrected", lambda: nvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC))
        cor = _ask({}, e, "ecc_corrected", lambda: nvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_VOLATILE_ECC))
        g["ecc_supported"] = unc is not None
        g["ecc_uncorrected"], g["ecc_corrected"] = unc or 0, cor or 0
        rows = _ask({}, e, "remapped_rows", lambda: nvml.nvmlDeviceGetRemappedRows(h))
        g["row_remapping"] = rows is not None
        if rows is not None:
            g["remapped_rows"] = dict(zip(("correctable", "uncorrectable", "pending", "failure"), map(int, rows)))
        else:
            sbe = _ask({}, e, "retired_sbe", lambda: nvml.nvmlDeviceGetRetiredPages(
                h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS))
            dbe = _ask({}, e, "retired_dbe", lambda: nvml.nvmlDeviceGetRetiredPages(
                h, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
            pending = _ask({}, e, "retired_pending", lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(h))
            g["retired_pages"] = {"sbe": len(sbe or []), "dbe": len(dbe or []), "pending": int(pending or 0)}
        procs = _ask({}, e, "processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h)) or []
        g["processes"] = [{"pid": int(p.pid), "used_memory_mb": int((p.usedGpuMemory or 0) // (1024 * 1024))}
                          for p in procs]
        if e:
            errors[f"gpus[{index}]"] = e
        gpus.append(g)
    ancestor = [[pynvml.NVML_TOPOLOGY_INTERNAL if a is b else
                 _ask({}, errors, f"common_ancestor[{i}][{j}]", lambda a=a, b=b: nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
                 for j, b in enumerate(handles)] for i, a in enumerate(handles)]
    try:
        driver = text(nvml.nvmlSystemGetDriverVersion())
    except NVMLError:
        driver = ""
    return {
        "format": CAPTURE_FORMAT,
        "captured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": node or getattr(nvml, "hostname", None) or socket.gethostname(),
        "cpus": cpus,
        "memory_mb": memory_mb,
        "driver_version": driver,
        "gpus": gpus,
        "common_ancestor": ancestor,
        "unsupported": errors,
    }


def capture_with_results(nvml: Any, node: str | None = None) -> dict:
    """The capture plus what discovery and one sampling round made of it (checked on replay)."""
    data = capture(nvml, node)
    inv = discover_node(nvml, data["hostname"])
    data["expected"] = {
        "config": build_cluster_config(inv),
        "gpu_types": {str(g.index): g.gpu_type for g in inv.gpus},
        "nvlink_peers": {str(g.index): list(g.nvlink_peers) for g in inv.gpus},
    }
    sampler = GpuSampler(nvml, data["hostname"])
    try:
        samples = sampler.sample()
    finally:
        sampler.close()
    data["samples"] = [dataclasses.asdict(s) for s in samples]
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    parser.add_argument("--backend", default="auto", help="NVML backend spec (default: the real pynvml)")
    parser.add_argument("--node", help="node name to record (default: the host name)")
    args = parser.parse_args(argv)
    nvml = load_backend(args.backend)
    with nvml_session(nvml) as ok:
        if not ok:
            print("capture: NVML is not available here (no NVIDIA driver?); nothing captured", file=sys.stderr)
            return 1
        data = capture_with_results(nvml, args.node)
    out = json.dumps(data, indent=1, sort_keys=False)
    if args.output:
        with open(args.output, "w") as f:
            f.write(out + "\n")
        print(f"capture: {len(data['gpus'])} GPU(s) from {data['hostname']} written to {args.output}", file=sys.stderr)
    else:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
