"""Shares of a GPU across a server crash (SIGKILL and start again), live: a running share keeps the same
eighths of its GPU (its slot) and, under MIG, the same MIG device; nothing new is put on them, and its
memory budget is still enforced."""

from __future__ import annotations

import pathlib

from fixtures.fake_nvml import add_fault
from waiting import wait_until

GATE = "class-over"


def command(tmp_path: pathlib.Path) -> str:
    return (f'echo $$ > "$HIVE_OUTPUT_DIR/pid"; echo "$CUDA_VISIBLE_DEVICES" > "$HIVE_OUTPUT_DIR/gpu"; '
            f'while [ ! -e {tmp_path / GATE} ]; do sleep 0.1; done')


def submit(srv, share: float, tmp_path) -> str:
    r = srv.request("POST", "jobs", json={"command": command(tmp_path), "tasks": [{"gpus": share}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def slots(srv) -> dict[str, tuple[int, float]]:
    """job -> (first eighth, share) on the one GPU, as the cluster view draws it."""
    (gpu,) = srv.request("GET", "cluster").json()["gpus"]
    return {s["job"]: (s["slot"], s["share"]) for s in gpu.get("shares") or []}


def placed(srv, job_id: str, *states: str) -> dict:
    (p,) = srv.wait_for_job(job_id, *(states or ("running",)), timeout=60)["placement"]
    return p


def seen_device(job: dict) -> str:
    out = pathlib.Path(job["output_dir"]) / "gpu"
    return wait_until(lambda: out.exists() and out.read_text().strip(), "the task to write what it sees")


def test_a_running_share_keeps_its_slot_and_budget_across_a_crash(live_server_factory, fake_hardware, tmp_path):
    hw = fake_hardware("single")  # one RTX 4090: a quarter's budget is 6141 MB
    srv = live_server_factory(cluster_config=None, config={"HiveLabApp": {
        "nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2, "stop_grace_s": 0.5,
        "gpu_share_modes": {"*": "timeslice"}}})
    try:
        first, a, b = (submit(srv, 0.25, tmp_path) for _ in range(3))
        for j in (first, a, b):
            srv.wait_for_job(j, "running", timeout=60)
        srv.request("DELETE", f"jobs/{first}").raise_for_status()  # frees the first quarter: a, b hold 2-3, 4-5
        srv.wait_for_job(first, "cancelled", timeout=60)
        before = slots(srv)
        assert before == {a: (2, 0.25), b: (4, 0.25)}
        assert [(placed(srv, j)["share"], placed(srv, j)["share_slot"]) for j in (a, b)] == [(0.25, 2), (0.25, 4)]
        pid_a = int(wait_until(lambda: (p := pathlib.Path(srv.wait_for_job(a, "running")["output_dir"]) / "pid").exists()
                               and p.read_text().strip(), "a's pid"))

        srv.kill()  # SIGKILL: no shutdown code runs; the tasks run on
        srv.start()
        assert srv.wait_for_job(a, "running")["state"] == srv.wait_for_job(b, "running")["state"] == "running"
        assert slots(srv) == before  # the same eighths of the same GPU
        assert [placed(srv, j)["share_slot"] for j in (a, b)] == [2, 4]

        # new shares take the free eighths only: 0-1 and 6-7; a half finds no free aligned half and waits
        c, d = submit(srv, 0.25, tmp_path), submit(srv, 0.25, tmp_path)
        for j in (c, d):
            srv.wait_for_job(j, "running", timeout=60)
        now = slots(srv)
        assert {j: now[j] for j in (a, b)} == before and sorted(now[j][0] for j in (c, d)) == [0, 6]
        half = submit(srv, 0.5, tmp_path)
        assert srv.wait_for_job(half, "queued")["reason"].startswith("no GPU of VC default has a free half")

        # its memory budget still holds after the restart: over it, a is warned, then stopped
        add_fault(hw, {"at": 0, "gpu": 0, "memory_used_mb": 9000, "processes": [{"pid": pid_a, "used_memory_mb": 9000}]})
        stopped = srv.wait_for_job(a, "cancelled", timeout=60)
        assert "over its budget of 6141 MB" in stopped["reason"]
        assert any(h["reason"].startswith("warning: its GPU share uses 9000 MB") for h in stopped["history"])
    finally:
        (tmp_path / GATE).touch()


def test_a_running_mig_share_keeps_its_mig_device_across_a_crash(live_server_factory, fake_hardware, tmp_path):
    hw = fake_hardware("a100-mig")  # MIG devices ...01 and ...02 of 1/8, ...03 of 2/8, ...04 of 4/8
    srv = live_server_factory(cluster_config=None, config={"HiveLabApp": {
        "nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2, "gpu_share_modes": {"*": "mig"}}})
    mig = "MIG-aaaa0000-0000-0000-0000-00000000000"
    try:
        x = submit(srv, 0.125, tmp_path)
        assert placed(srv, x)["mig_device"] == mig + "1"
        y = submit(srv, 0.125, tmp_path)
        assert placed(srv, y)["mig_device"] == mig + "2"
        assert seen_device(srv.wait_for_job(x, "running")) == mig + "1"
        srv.request("DELETE", f"jobs/{y}").raise_for_status()  # ...02 is free again; x holds ...01
        srv.wait_for_job(y, "cancelled", timeout=60)
        before = slots(srv)

        srv.kill()
        srv.start()
        assert placed(srv, x)["mig_device"] == mig + "1" and slots(srv) == before

        # a new eighth gets the free MIG device, never x's
        w = submit(srv, 0.125, tmp_path)
        p = placed(srv, w)
        assert p["mig_device"] == mig + "2" and p["share_slot"] != before[x][0]
        assert seen_device(srv.wait_for_job(w, "running")) == mig + "2"
        # and the devices go back when the shares end
        (tmp_path / GATE).touch()
        for j in (x, w):
            srv.wait_for_job(j, "succeeded", timeout=60)
        z = submit(srv, 0.125, tmp_path)
        assert placed(srv, z, "running", "succeeded")["mig_device"] == mig + "1"
    finally:
        (tmp_path / GATE).touch()
