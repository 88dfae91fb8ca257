"""On a machine with NVIDIA GPUs and their driver: what the fake NVML and the fake device nodes stand for
elsewhere in the suite, checked against the real thing.

Skipped where NVML finds no GPU (CI and the machines hive-lab is built on). Where one is, as root:

    .venv/bin/python -m pytest tests/hardware/test_real_gpu.py -v

A real server (run as root, jobs under their owners' accounts, as a course runs) discovers the machine
through NVML, locks the GPUs' nodes, and runs a CUDA program in a job; a student's own processes, before,
during and after it, reach no GPU, whatever the driver's helpers do. The CUDA program is PyTorch's:
``HIVE_REAL_GPU_PYTHON`` names a Python with torch that the test accounts can run (default: this one).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from fixtures.live_server import LiveServer
from fixtures.unix_accounts import ACCOUNTS
from waiting import wait_until


def _nvml_gpus() -> str | None:
    """Why this machine cannot run these tests, or None when NVML answers with at least one GPU."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver: the normal case off a GPU machine
        return f"no NVIDIA driver here (NVML: {exc})"
    try:
        return None if pynvml.nvmlDeviceGetCount() > 0 else "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()


_WHY_NOT = _nvml_gpus()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")

A, B = ACCOUNTS
CUDA_PYTHON = os.environ.get("HIVE_REAL_GPU_PYTHON", sys.executable)
# what a student's own process runs to find a GPU: CUDA's own answer, not a guess from the device nodes
CUDA_PROBE = ("import torch; ok = torch.cuda.is_available(); "
              "print('cuda', ok, torch.cuda.device_count() if ok else 0)")


def _smi(*fields: str) -> list[dict[str, str]]:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.splitlines() if line.strip()]


def _nodes() -> dict[str, tuple[int, int, int]]:
    """Every NVIDIA device node: owner, group, mode."""
    out = {}
    for path in sorted(pathlib.Path("/dev").glob("nvidia*")) + sorted(pathlib.Path("/dev").glob("nvidia-caps/*")):
        if path.is_char_device():
            st = path.stat()
            out[str(path)] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
    return out


def _driver_params() -> dict[str, str]:
    try:
        text = pathlib.Path("/proc/driver/nvidia/params").read_text()
    except OSError:
        return {}
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


@pytest.fixture(scope="module")
def torch_python(unix_accounts):
    from fixtures.unix_accounts import run_as

    if importlib.util.find_spec("torch") is None and "HIVE_REAL_GPU_PYTHON" not in os.environ:
        pytest.skip("needs PyTorch for the CUDA program (or HIVE_REAL_GPU_PYTHON naming a Python that has it)")
    r = run_as(unix_accounts[A], CUDA_PYTHON, "-c", "import torch")
    assert r.returncode == 0, f"{CUDA_PYTHON} with torch is not runnable by {A}: {r.stderr[-800:]}"
    return CUDA_PYTHON


def _driver_undoes_the_lock() -> str | None:
    from hive_lab_server.execution.isolation.gpu_access import driver_reopens_nodes

    return driver_reopens_nodes("/proc/driver/nvidia/params", 0, 0o600)


UNDONE = _driver_undoes_the_lock() if _WHY_NOT is None else None
needs_lock = pytest.mark.skipif(UNDONE is not None, reason=f"this driver re-opens the nodes: {UNDONE}")


@pytest.fixture(scope="module")
def srv(unix_accounts):
    """A course's server: jobs under their owners' accounts; the GPUs locked where the driver keeps the lock
    (else run without it, as the refusal's sentence offers, to check the rest); MPS shares where they can
    work (without the lock: with it the server refuses them, tests/isolation/test_gpu_driver_params.py)."""
    base = tempfile.mkdtemp(prefix="hive-real-gpu-", dir="/tmp")
    os.chmod(base, 0o711)  # jobs under the students' accounts reach their dirs below it
    before = _nodes()
    locked = UNDONE is None
    modes = {"*": "mps"} if shutil.which("nvidia-cuda-mps-control") and not locked else {"*": "timeslice"}
    server = LiveServer(base, cluster_config=None, users={A: {}, B: {}}, vc_access={"*": ["*"]},
                        config={"Isolation": {"run_as": "owner", "lock_gpu_devices": locked},
                                "HiveLabApp": {"nvml_backend": "auto", "gpu_sample_interval_s": 0.5,
                                               "gpu_share_modes": modes}}).start()
    server.nodes_before, server.locked, server.share_mode = before, locked, modes["*"]
    yield server
    for job in server.request("GET", "jobs", params={"state": "queued,running,scheduled"}).json().get("jobs", []):
        server.request("DELETE", f"jobs/{job['id']}")
    server.close()
    print("\nthe server's log, its end:\n" + server.log()[-6000:])
    for path, (uid, gid, mode) in before.items():  # the machine as it was
        if os.path.exists(path):
            os.chown(path, uid, gid)
            os.chmod(path, mode)
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(UNDONE is None, reason="this driver keeps the nodes locked (its parameters agree)")
def test_a_server_refuses_to_lock_what_this_driver_would_reopen(unix_accounts):
    """On a stock driver (ModifyDeviceFiles 1, DeviceFileMode 0666) the lock cannot hold: the server says so
    and does not start, rather than promise GPUs only through jobs."""
    base = tempfile.mkdtemp(prefix="hive-real-gpu-refused-", dir="/tmp")
    os.chmod(base, 0o711)
    before = _nodes()
    server = LiveServer(base, cluster_config=None, users={A: {}}, vc_access={"*": ["*"]},
                        config={"Isolation": {"run_as": "owner"}})
    try:
        with pytest.raises(RuntimeError) as refused:
            server.start()
        print("refused:", str(refused.value).strip().splitlines()[-1][:600])
        assert "NVreg_DeviceFileMode=0600" in str(refused.value)
    finally:
        server.close()
        for path, (uid, gid, mode) in before.items():
            if os.path.exists(path):
                os.chown(path, uid, gid)
                os.chmod(path, mode)
        shutil.rmtree(base, ignore_errors=True)


def _submit(srv, user, command, gpus=1):
    r = srv.request("POST", "jobs", user=user, json={"command": command, "tasks": [{"gpus": gpus}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _log(srv, job_id, user) -> str:
    return srv.request("GET", f"jobs/{job_id}/logs", user=user).json()["data"]


def test_the_cluster_is_the_machine_nvml_sees(srv):
    smi = _smi("index", "uuid", "name", "memory.total")
    cluster = srv.request("GET", "cluster").json()
    print("nvidia-smi:", smi)
    print("GET cluster gpus:", [(g["node"], g["index"], g["type"], g["uuid"]) for g in cluster["gpus"]])
    assert cluster["gpus_total"] == len(smi)
    assert sorted(g["uuid"] for g in cluster["gpus"]) == sorted(s["uuid"] for s in smi)
    by_uuid = {s["uuid"]: s for s in smi}
    for g in cluster["gpus"]:
        # the type is the model's family, as docs/hardware.md says: "NVIDIA H100 80GB HBM3" -> "H100"
        family = re.search(r"\b([A-Z]+\d+[A-Za-z]*)\b", by_uuid[g["uuid"]]["name"].replace("NVIDIA ", "")).group(1)
        assert g["type"].split("-")[0] == family, (g["type"], by_uuid[g["uuid"]]["name"])
        assert int(g["index"]) == int(by_uuid[g["uuid"]]["index"])
    assert "cluster config vs NVML" not in srv.log()


@needs_lock
def test_the_nodes_are_locked_and_a_students_own_cuda_program_finds_no_gpu(srv, unix_accounts, torch_python):
    from fixtures.unix_accounts import run_as

    print("driver params:", {k: v for k, v in _driver_params().items()
                             if k.startswith(("DeviceFile", "ModifyDeviceFiles"))})
    print("nodes before the server:", srv.nodes_before)
    print("nodes after its start:", _nodes())
    gpu_nodes = [p for p in _nodes() if re.fullmatch(r"/dev/nvidia(\d+|ctl)", p)]
    assert gpu_nodes, _nodes()
    for path in gpu_nodes:
        assert _nodes()[path] == (0, 0, 0o600), (path, _nodes()[path])
    own = run_as(unix_accounts[A], torch_python, "-c", CUDA_PROBE)
    smi = run_as(unix_accounts[A], "nvidia-smi", "-L")
    print("student's own CUDA program:", own.stdout.strip(), own.stderr.strip()[-300:])
    print("student's own nvidia-smi -L:", smi.returncode, (smi.stdout + smi.stderr).strip()[-300:])
    assert "cuda False 0" in own.stdout, (own.stdout, own.stderr[-800:])
    assert smi.returncode != 0 and "GPU-" not in smi.stdout, smi.stdout
    # the driver's set-uid helper (nvidia-modprobe), which CUDA runs when it cannot open a node, may
    # re-create the nodes with the driver's own modes: they must still be locked after the attempts
    for path in gpu_nodes:
        assert _nodes()[path] == (0, 0, 0o600), (path, _nodes()[path], _driver_params())
    again = run_as(unix_accounts[A], torch_python, "-c", CUDA_PROBE)
    assert "cuda False 0" in again.stdout, again.stdout


def test_a_gpu_job_computes_on_its_gpu_and_the_sampler_sees_it(srv, unix_accounts, torch_python):
    program = ("import os, time, torch; d = torch.device('cuda'); "
               "print('visible', os.environ.get('CUDA_VISIBLE_DEVICES'), 'count', torch.cuda.device_count(), "
               "'name', torch.cuda.get_device_name(0), flush=True); "
               "x = torch.randn(8192, 8192, device=d); end = time.monotonic() + 15\n"
               "while time.monotonic() < end:\n"
               "    y = x @ x; torch.cuda.synchronize()\n"
               "print('sum', float(y.float().sum().isfinite()), flush=True)")
    job_id = _submit(srv, A, f"{torch_python} -c \"{program}\"")
    job = srv.wait_for_job(job_id, "running", "failed", timeout=60, user=A)
    assert job["state"] == "running", (job, _log(srv, job_id, A))
    gpu = job["placement"][0]["gpus"][0]

    def busy():
        g = {x["index"]: x for x in srv.request("GET", "cluster").json()["gpus"]}[gpu]
        return g if g.get("utilization", 0) > 0 and g.get("memory_used_mb", 0) > 100 else None

    seen = wait_until(busy, what="the sampler reading the job's GPU busy", timeout=60)
    print("GET cluster while the job computes:", {k: seen.get(k) for k in ("utilization", "memory_used_mb",
                                                                            "temperature_c", "power_w")})
    metrics = srv.request("GET", "metrics").text
    mine = [line for line in metrics.splitlines() if line.startswith("hive_lab_job_gpu") and job_id in line]
    print("job metrics:", mine)
    wait_until(lambda: any(line.startswith("hive_lab_job_gpu_memory_used_bytes") and job_id in line
                           and float(line.rsplit(" ", 1)[1]) > 0
                           for line in srv.request("GET", "metrics").text.splitlines()),
               what="the job's own GPU memory (its processes attributed to it)", timeout=30)
    # while the job holds the GPU, the student's own process still finds none (where the lock holds)
    student = unix_accounts[A]
    own = None if not srv.locked else subprocess.run(
        ["setpriv", f"--reuid={student.pw_uid}", f"--regid={student.pw_gid}", "--init-groups", "--",
         torch_python, "-c", CUDA_PROBE], capture_output=True, text=True)
    assert own is None or "cuda False 0" in own.stdout, own.stdout + own.stderr[-500:]
    done = srv.wait_for_job(job_id, "succeeded", "failed", timeout=90, user=A)
    out = _log(srv, job_id, A)
    print("job log:", out.strip()[-600:])
    assert done["state"] == "succeeded", out
    assert re.search(r"count 1 name \S", out) and "sum 1.0" in out, out
    for path, owner in _nodes().items():
        if srv.locked and re.fullmatch(r"/dev/nvidia(\d+|ctl)", path):
            assert owner == (0, 0, 0o600), (path, owner)


def test_an_mps_share_runs_its_cuda_program_through_the_gpus_daemon(srv, unix_accounts, torch_python):
    if srv.share_mode != "mps":
        pytest.skip("no MPS here: nvidia-cuda-mps-control missing, or the GPUs are locked (MPS is refused then)")
    program = ("import os, torch; x = torch.randn(2048, 2048, device='cuda'); "
               "print('pipe', os.environ.get('CUDA_MPS_PIPE_DIRECTORY'), 'threads', "
               "os.environ.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'), 'ok', float((x @ x).isfinite().all()))")
    job_id = _submit(srv, A, f"{torch_python} -c \"{program}\"", gpus=0.5)
    done = srv.wait_for_job(job_id, "succeeded", "failed", timeout=90, user=A)
    out = _log(srv, job_id, A)
    print("MPS job log:", out.strip()[-800:])
    print("server log (MPS):", [line for line in srv.log().splitlines() if "MPS" in line or "mps" in line][-10:])
    assert done["state"] == "succeeded", out
    assert "threads 50" in out and "ok 1.0" in out, out


def test_mig_mode_is_read_as_the_driver_reports_it():
    """MIG is never switched by these tests (that needs a GPU reset): the check is that hive-lab reads the
    mode and the MIG devices as nvidia-smi reports them."""
    from hive_lab_server.hardware.nvml_backend import load_backend, nvml_session
    from hive_lab_server.hardware.sharing import discover

    smi = _smi("index", "mig.mode.current")
    print("nvidia-smi MIG mode:", smi)
    nvml = load_backend("auto")
    with nvml_session(nvml):
        _, migs = discover(nvml, "node")
    print("hive-lab MIG devices:", migs)
    for s in smi:
        listed = bool(migs.get(("node", int(s["index"]))))
        if s["mig.mode.current"].lower() != "enabled":
            assert not listed, (s, migs)  # MIG off (or "[N/A]": not a MIG GPU): whole-GPU shares only
        else:  # on, with devices made: hive-lab lists them; on with none made: nothing to hand out
            print("MIG on: devices listed by hive-lab:", listed)


async def test_a_gpu_notebook_kernel_computes_on_its_gpu_and_gives_it_back(srv, unix_accounts, torch_python,
                                                                          tmp_path, monkeypatch):
    """A notebook kernel of one GPU, started as Jupyter starts it (the ``hive`` provisioner, a kernelspec
    from ``hive-lab kernelspec install``), runs CUDA on its GPU as the student, and its job ends with it."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets.config import Config

    from test_hw_shares_kernels_live import run_code

    prefix = tmp_path / "kernelspecs"
    done = subprocess.run([torch_python, "-m", "hive_lab.cli", "kernelspec", "install", "--name", "gpu-one",
                           "--gpus", "1", "--prefix", str(prefix)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    km = AsyncKernelManager(kernel_name="gpu-one", config=Config({"HiveProvisioner": {
        "url": srv.url, "token": srv.tokens[A], "queue_log_interval_s": 3600, "placement_wait_s": 120}}))
    await km.start_kernel()
    try:
        out = await run_code(km, "import os, torch; x = torch.randn(4096, 4096, device='cuda'); "
                                 "print('K', torch.cuda.device_count(), float((x @ x).isfinite().all()), os.getuid(), "
                                 "torch.cuda.get_device_name(0))", timeout=180)
    finally:
        await km.shutdown_kernel(now=True)
    print("kernel said:", out.strip())
    assert f"K 1 1.0 {unix_accounts[A].pw_uid} NVIDIA" in out, out
    wait_until(lambda: not srv.request("GET", "jobs", user=A, params={"state": "queued,scheduled,running"}).json()["jobs"],
               what="the kernel's job to end with the kernel", timeout=60)
    jobs = srv.request("GET", "jobs", user=A).json()["jobs"]
    print("the student's jobs:", [(j["id"], j.get("kind"), j["state"]) for j in jobs])


@needs_lock
def test_a_gpu_node_taken_out_of_a_running_job_dies_with_the_job(srv, unix_accounts, torch_python):
    """The student's own process opens the job's GPU node through /proc/<task>/root (same account: allowed)
    while the job runs; when the job ends, the descriptor sweep kills that holder (docs/isolation.md)."""
    import psutil

    student = unix_accounts[A]
    marker = f"held-{os.getpid()}"
    job_id = _submit(srv, A, f"{torch_python} -c \"import time, torch; torch.ones(1, device='cuda'); "
                             f"print('{marker}', flush=True); time.sleep(120)\"")
    wait_until(lambda: marker in _log(srv, job_id, A), what="the job holding its GPU", timeout=90)
    gpu = srv.request("GET", f"jobs/{job_id}", user=A).json()["placement"][0]["gpus"][0]
    task = wait_until(lambda: next((p.pid for p in psutil.process_iter(["uids", "cmdline"])
                                    if p.info["uids"] and p.info["uids"].real == student.pw_uid
                                    and marker in " ".join(p.info["cmdline"] or [])), None), what="the job's process")
    holder = subprocess.Popen(
        ["setpriv", f"--reuid={student.pw_uid}", f"--regid={student.pw_gid}", "--init-groups", "--",
         torch_python, "-c", f"import os, time; fd = os.open('/proc/{task}/root/dev/nvidia{gpu}', os.O_RDWR); "
                             f"print('opened', flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "opened"
        assert srv.request("DELETE", f"jobs/{job_id}", user=A).status_code == 200
        srv.wait_for_job(job_id, "cancelled", "failed", timeout=60, user=A)
        wait_until(lambda: holder.poll() is not None, what="the sweep to end the holder", timeout=30)
        assert holder.returncode == -9, holder.returncode
        print("sweep:", [line for line in srv.log().splitlines() if "killed pid" in line][-1][:300])
    finally:
        if holder.poll() is None:
            holder.kill()
