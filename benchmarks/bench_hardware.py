"""Cost of the hardware layer per round, on the fake NVML backend (no GPU needed).

    .venv/bin/python benchmarks/bench_hardware.py [--rounds N] [--gpus 8,16]
    .venv/bin/python benchmarks/bench_hardware.py --real [--rounds N]   # this machine's GPUs, real NVML

For machines of 8 and 16 GPUs (DGX-like: 2 sockets, a PCIe switch per pair, NVLink pairs), times
(medians over ``--rounds``): discovery + cell tree (``detect_local_cluster``), one sampling round of
every GPU (readings, ECC, remapped rows, processes, XID events), the health rules on it, and one
Prometheus scrape of the GPU collector with 50 jobs attributed. The fake backend's own cost is
included, so on real NVML the sampling figure is the Python overhead plus NVML's call latency.
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

from hive_lab_server.hardware.fake_nvml import FakeNvml
from hive_lab_server.hardware.health import HealthMonitor
from hive_lab_server.hardware.inventory import detect_local_cluster
from hive_lab_server.hardware.metrics import GpuMetrics
from hive_lab_server.hardware.sampler import GpuSampler, attribute, job_usage


def machine(n: int) -> dict:
    return {
        "hostname": f"box{n}",
        "cpus": 128,
        "memory_mb": 1_000_000,
        "gpus": [{"model": "NVIDIA A100-SXM4-80GB", "memory_mb": 81920, "numa_node": i * 2 // n,
                  "pcie_switch": f"sw{i // 2}", "utilization": 50, "memory_used_mb": 1000,
                  "processes": [{"pid": 10_000 + i, "used_memory_mb": 900}]} for i in range(n)],
        "nvlink": [[i, i + 1] for i in range(0, n, 2)],
    }


def timed(fn, rounds: int) -> float:
    xs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--gpus", default="8,16")
    parser.add_argument("--real", action="store_true", help="time discovery and sampling on this machine's NVML")
    args = parser.parse_args()
    if args.real:
        return real(args.rounds)
    print(f"{'GPUs':>5} {'discovery ms':>13} {'sample ms':>10} {'health ms':>10} {'scrape ms':>10}   (medians of {args.rounds})")
    for n in [int(x) for x in args.gpus.split(",")]:
        desc = machine(n)
        discovery = timed(lambda: detect_local_cluster(FakeNvml(desc)), args.rounds)
        nvml = FakeNvml(desc)
        sampler = GpuSampler(nvml, desc["hostname"])
        sampler.open()
        sample = timed(sampler.sample, args.rounds)
        pids = {10_000 + i: f"j-{i % 50:06d}" for i in range(n)}
        samples = attribute(sampler.sample(), pids, {(desc["hostname"], i): [pids[10_000 + i]] for i in range(n)})
        monitor = HealthMonitor()
        health = timed(lambda: monitor.observe(samples), args.rounds)
        registry = CollectorRegistry()
        metrics = GpuMetrics(registry)
        metrics.update(samples, jobs=job_usage(samples),
                       job_labels={f"j-{k:06d}": {"user": "u", "vc": "v"} for k in range(50)})
        scrape = timed(lambda: generate_latest(registry), args.rounds)
        sampler.close()
        print(f"{n:>5} {discovery:>13.2f} {sample:>10.2f} {health:>10.3f} {scrape:>10.2f}")


def real(rounds: int) -> None:
    """Discovery and one sampling round on the real NVML (wall and CPU medians: NVML's calls wait on the
    driver, which the fake backend does not)."""
    import socket

    import pynvml

    from hive_lab_server.hardware.nvml_backend import nvml_session

    def both(fn) -> tuple[float, float]:
        wall, cpu = [], []
        for _ in range(rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        return statistics.median(wall) * 1000, statistics.median(cpu) * 1000

    with nvml_session(pynvml) as ok:
        if not ok:
            raise SystemExit("no NVIDIA driver here (NVML did not initialise)")
        n = pynvml.nvmlDeviceGetCount()
        discovery = both(lambda: detect_local_cluster(pynvml))
        sampler = GpuSampler(pynvml, socket.gethostname())
        sampler.open()
        sample = both(sampler.sample)
        sampler.close()
    print(f"{n} GPU(s), real NVML, medians of {rounds}: discovery {discovery[0]:.2f} ms wall / {discovery[1]:.2f} ms CPU; "
          f"one sampling round {sample[0]:.2f} ms wall / {sample[1]:.2f} ms CPU")


if __name__ == "__main__":
    main()
