"""What one GPU descriptor sweep (isolation/gpu_holders.py) costs on this machine's /proc: the median
wall and CPU time of N scans, with what they read (processes, open descriptors, file mappings). Run as
root (as the server that sweeps): other users' descriptors and maps are unreadable otherwise.

Three rows: the sweep as the server runs it (processes whose uids are all 0 are not read: root may hold
a GPU), the upper bound where every process is read (a machine full of users' processes), and the same
without the mappings. No GPU is needed: the scan reads every descriptor whatever the nodes are (the
kernel's ``full`` device stands in for one).

    python benchmarks/bench_gpu_sweep.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from hive_lab_server.execution.isolation.gpu_holders import GpuNode, ScanCounts, holdings


def measure(n: int, **options) -> tuple[float, float, ScanCounts]:
    rdev = os.stat("/dev/full").st_rdev
    nodes = {rdev: GpuNode("/dev/full", rdev, os.minor(rdev))}
    walls, cpus, counts = [], [], ScanCounts()
    for _ in range(n):
        counts = ScanCounts()
        w0, c0 = time.perf_counter(), time.process_time()
        holdings(nodes, counts=counts, **options)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), counts


def main(n: int) -> None:
    if os.geteuid() != 0:
        sys.exit("run as root: the sweep reads every user's /proc/PID/fd and maps")
    print(f"GPU descriptor sweep over /proc, median of {n} (load average {os.getloadavg()[0]:.1f}):")
    for label, options in (("as run (root's processes skipped)", {}),
                           ("every process, fds and maps", {"skip_root": False}),
                           ("every process, fds only", {"skip_root": False, "maps": False})):
        wall, cpu, c = measure(n, **options)
        print(f"  {label:36s} {wall * 1000:7.2f} ms wall, {cpu * 1000:7.2f} ms CPU; {c.processes} processes, "
              f"{c.judged} read, {c.fds} fds, {c.mappings} file mappings")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
