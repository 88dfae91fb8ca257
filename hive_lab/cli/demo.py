"""``hive-lab demo``: JupyterLab with hive-lab on the default simulated cluster, plus a few sample jobs.

Starts ``jupyter lab`` (local launcher, the built-in ``default`` cluster: one node, 4 simulated GPUs,
one VC ``default``; a fresh store and jobs dir unless ``--dir`` is given), waits until it answers,
submits sample jobs (a 2-GPU training run, a 2-task gang, an opportunistic job, one that has to queue)
writes a sample notebook (``hive-lab-demo.ipynb``) into its root dir and prints the URL. Ctrl-C (or
SIGTERM) cancels every job still active on the demo's server, then stops JupyterLab.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SAMPLE_JOBS = [
    {"name": "train-resnet", "command": "for e in 1 2 3 4 5 6; do echo epoch $e/6 on GPUs $CUDA_VISIBLE_DEVICES; sleep 10; done",
     "tasks": [{"gpus": 2}]},
    {"name": "ddp-gang", "command": "echo rank $RANK of $WORLD_SIZE, master $MASTER_ADDR:$MASTER_PORT; sleep 45",
     "tasks": [{"name": "worker", "count": 2, "gpus": 1}]},
    {"name": "sweep-opportunistic", "priority": "opportunistic", "max_retries": 2,
     "command": "for i in $(seq 1 9); do echo trial $i; sleep 5; done", "tasks": [{"gpus": 1}]},
    {"name": "big-eval", "command": "echo evaluating on 4 GPUs: $CUDA_VISIBLE_DEVICES; sleep 20",
     "tasks": [{"gpus": 4}]},
]


SAMPLE_NOTEBOOK = "hive-lab-demo.ipynb"
SAMPLE_CELLS = [
    ("markdown", "# hive-lab demo\nA simulated 4-GPU machine. `%hive_status` shows who holds which GPU; "
                 "`%%submit` runs a cell as a scheduled job; its output stays in the notebook."),
    ("code", "%load_ext hive_lab"),
    ("code", "%hive_status"),
    ("code", "%%submit --gpus 1 --name hello --wait\nimport os\n"
             "print('hello from GPU', os.environ['CUDA_VISIBLE_DEVICES'])"),
    ("code", "%%submit --gpus 2 --name background\nimport time\nfor step in range(5):\n"
             "    print('step', step, flush=True)\n    time.sleep(2)"),
    ("code", "%hive_jobs"),
]


def write_sample_notebook(root: str) -> str:
    """The demo's sample notebook in ``root`` (kept when it is there already); returns its name."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    path = os.path.join(root, SAMPLE_NOTEBOOK)
    if not os.path.exists(path):
        cells = [new_code_cell(src) if kind == "code" else new_markdown_cell(src) for kind, src in SAMPLE_CELLS]
        nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {
            "name": "python3", "display_name": "Python 3", "language": "python"}}), path)
    return SAMPLE_NOTEBOOK


def cancel_active_jobs(client) -> list[str]:
    """Cancel every job still active on the demo's server (the samples and whatever was submitted)."""
    from ..errors import HiveLabError

    try:
        page = client.jobs_page(user=None, state="submitted,queued,scheduled,running", limit=1000)
    except HiveLabError:
        return []
    ids = [job["id"] for job in page.get("jobs", [])]
    for job_id in ids:
        try:
            client.cancel(job_id, reason="hive-lab demo stopped")
        except HiveLabError:  # ended meanwhile, or the server is going: the demo stops all the same
            pass
    return ids


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="start JupyterLab with hive-lab on a simulated 4-GPU cluster and sample jobs")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--cluster", default="default", help="cluster config: a file or a built-in model (default: default)")
    p.add_argument("--dir", default=None, help="keep the demo's store and jobs here (default: a fresh temp dir)")
    p.add_argument("--no-jobs", action="store_true", help="do not submit the sample jobs")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--token", default=None, help="server token (default: a random one)")
    p.set_defaults(func=run)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(client, proc: subprocess.Popen, timeout: float = 120) -> None:
    from ..errors import HiveLabError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"hive-lab demo: JupyterLab exited with code {proc.returncode}")
        try:
            client.me(refresh=True)
            return
        except HiveLabError:  # not listening yet, or hive-lab still recovering
            pass
        time.sleep(0.2)
    raise SystemExit(f"hive-lab demo: JupyterLab did not answer within {timeout:.0f}s")


def submit_samples(client) -> list[dict]:
    """The sample jobs, as they are (not in this process's environment: the demo's server has its own)."""
    return [client.submit(body, inherit_env=False) for body in SAMPLE_JOBS]


def run(args) -> int:
    workdir = args.dir or tempfile.mkdtemp(prefix="hive-lab-demo-")
    os.makedirs(workdir, exist_ok=True)
    port = args.port or _free_port()
    token = args.token or secrets.token_hex(16)
    url = f"http://{args.ip}:{port}/"
    cmd = [
        sys.executable, "-m", "jupyterlab", f"--ServerApp.port={port}", f"--ServerApp.ip={args.ip}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={workdir}",
        f"--HiveLabApp.cluster_config={args.cluster}", "--HiveLabApp.launcher=local",
        f"--HiveLabApp.db_url=sqlite:///{os.path.join(workdir, 'hive_lab.sqlite')}",
        f"--HiveLabApp.jobs_root={os.path.join(workdir, 'jobs')}",
        "--HiveLabApp.nvml_backend=none",
    ]
    if args.no_browser:
        cmd.append("--no-browser")
    if os.geteuid() == 0:
        # one person's sandbox started by root: their sample jobs run as root too (c.Isolation.run_as)
        cmd += ["--allow-root", "--Isolation.run_as=server"]
    proc = subprocess.Popen(cmd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop JupyterLab on SIGTERM too (finally below)
    from ..client import Client

    # one client (hive_lab.client: token, URL, errors, timeouts); short timeouts while JupyterLab starts
    client = Client(url, token, timeout=30, busy_retry_s=0)
    try:
        _wait_ready(Client(url, token, timeout=2, busy_retry_s=0), proc)
        if not args.no_jobs:
            for job in submit_samples(client):
                print(f"hive-lab demo: submitted {job['id']} {job['name']:<20} {job['state']:<10} {job['reason']}")
        notebook = write_sample_notebook(workdir)
        print(f"hive-lab demo: JupyterLab with hive-lab is at {url}lab?token={token}")
        print(f"hive-lab demo: the sample notebook: {url}lab/tree/{notebook}?token={token}")
        print(f"hive-lab demo: try `hive-lab jobs --url {url} --token {token}`; Ctrl-C stops the demo")
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:
            cancelled = cancel_active_jobs(client)
            if cancelled:
                print(f"hive-lab demo: cancelled {', '.join(cancelled)}", flush=True)
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not args.dir:
            _kill_tasks(os.path.join(workdir, "jobs"))
            shutil.rmtree(workdir, ignore_errors=True)


def _kill_tasks(jobs_root: str) -> None:
    """The local launcher's tasks outlive the server on purpose; a throw-away demo ends them."""
    import glob
    import json

    for info in glob.glob(os.path.join(jobs_root, ".*launcher", "*", "*.json")):
        try:
            with open(info) as f:
                os.killpg(int(json.load(f)["pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
