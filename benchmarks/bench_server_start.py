"""A hive-lab Jupyter server's start: from launching the process to its first answer, and the CPU it spent.

    .venv/bin/python benchmarks/bench_server_start.py [--runs 5]

Starts ``--runs`` fresh servers one after another (a simulated 4-GPU cluster, SQLite, no zygote: each a new
process, as a user's JupyterLab or a Hub's single-user server) and prints the medians. It also says whether
this environment imports ``rfc3987_syntax`` at a server's start: jsonschema imports it for the ``iri``
formats when it is installed (an extra of a dependency brings it), and it builds ~35 parsers as it is
imported; ``scripts/setup.sh`` and the deployment docs uninstall it. To see its cost, run this once with it
(``.venv/bin/pip install rfc3987-syntax``) and once without (``.venv/bin/pip uninstall -y rfc3987-syntax``).
A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fixtures.live_server import LiveServer  # noqa: E402

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"default": 4}}


def imports_iri_parsers() -> bool:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import jupyter_server.serverapp"],
                         capture_output=True, text=True, check=True)
    return "rfc3987_syntax.syntax_helpers" in out.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; a server's start imports "
          f"rfc3987_syntax: {'yes' if imports_iri_parsers() else 'no'}")
    walls, cpus = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            srv = LiveServer(pathlib.Path(tmp) / "s", cluster_config=CLUSTER)
            t0 = time.perf_counter()
            try:
                srv.start()
                walls.append(time.perf_counter() - t0)
                times = psutil.Process(srv.proc.pid).cpu_times()
                cpus.append(times.user + times.system)
            finally:
                srv.close()
    print(f"start to first answer: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max "
          f"{max(walls):.2f}); the server's CPU by then: median {statistics.median(cpus):.2f} s, {args.runs} starts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
