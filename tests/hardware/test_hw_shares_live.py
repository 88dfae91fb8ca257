"""The course setup, live: a real Jupyter server on a fake-NVML machine with one GPU. Four students'
jobs of ``--gpus 0.25`` run on that GPU at once, the fifth waits with a reason; one that goes over its
memory budget (fake NVML's per-process memory) is warned in its history, then stopped with the
reason, and the fifth starts in its place."""

import pathlib

from fixtures.fake_nvml import add_fault
from waiting import wait_until

STUDENTS = [f"student{i}" for i in range(5)]


def test_four_quarter_gpu_jobs_share_one_gpu_the_fifth_waits_and_a_memory_hog_is_stopped(
        live_server_factory, fake_hardware, tmp_path):
    hw = fake_hardware("single")  # one RTX 4090, 24564 MB: a quarter's budget is 6141 MB
    srv = live_server_factory(
        cluster_config=None, users={s: {} for s in STUDENTS}, vc_access={s: ["default"] for s in STUDENTS},
        config={"HiveLabApp": {"nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2, "stop_grace_s": 0.5,
                               "gpu_share_modes": {"*": "timeslice"}}},
    )
    gate = tmp_path / "class-over"
    command = (f'echo $$ > "$HIVE_OUTPUT_DIR/pid"; echo "$CUDA_VISIBLE_DEVICES $HIVE_GPU_MEMORY_MB" '
               f'> "$HIVE_OUTPUT_DIR/gpu"; while [ ! -e {gate} ]; do sleep 0.1; done')
    ids = []
    try:
        for s in STUDENTS[:4]:
            r = srv.request("POST", "jobs", user=s, json={"command": command, "tasks": [{"gpus": 0.25}]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        r = srv.request("POST", "jobs", user=STUDENTS[4], json={"command": command, "tasks": [{"gpus": 0.25}]})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
        running = [srv.wait_for_job(j, "running", user=s) for j, s in zip(ids[:4], STUDENTS)]
        assert all(j["gpus"] == 0.25 and j["placement"][0]["gpus"] == [0] for j in running)
        fifth = srv.request("GET", f"jobs/{ids[4]}", user=STUDENTS[4]).json()
        assert fifth["state"] == "queued"
        assert fifth["reason"].startswith("no GPU of VC default has a free quarter; 0 of 1 GPUs hold whole-GPU jobs")
        (gpu,) = srv.request("GET", "cluster").json()["gpus"]
        assert [(x["job"], x["user"], x["share"]) for x in gpu["shares"]] == \
            [(j, s, 0.25) for j, s in zip(ids[:4], STUDENTS)]
        for j in ids[:4]:  # time-slicing: each sees the one GPU and knows its budget
            out = pathlib.Path(running[0]["output_dir"]).parent.parent / j / "output"
            wait_until(lambda o=out: (o / "gpu").exists(), what="the task to start")
            assert (out / "gpu").read_text().split()[1] == "6141"

        # student0's process grows past its budget (NVML's per-process memory)
        out0 = pathlib.Path(running[0]["output_dir"])
        pid = int(wait_until(lambda: (out0 / "pid").exists() and (out0 / "pid").read_text().strip(), what="pid"))
        add_fault(hw, {"at": 0, "gpu": 0, "memory_used_mb": 9000, "processes": [{"pid": pid, "used_memory_mb": 9000}]})
        stopped = wait_until(lambda: (lambda j: j if j["state"] == "cancelled" else None)(
            srv.request("GET", f"jobs/{ids[0]}", user=STUDENTS[0]).json()), what="the memory hog to be stopped")
        history = [h["reason"] for h in stopped["history"]]
        warned = [h for h in history if h.startswith("warning: its GPU share uses 9000 MB")]
        assert warned and "over its budget of 6141 MB" in warned[0]
        assert "stopped: its GPU share used 9000 MB of GPU memory, over its budget of 6141 MB" in stopped["reason"]
        assert history.index(warned[0]) < len(history) - 1
        srv.wait_for_job(ids[4], "running", user=STUDENTS[4])  # the fifth takes the freed quarter
        others = [srv.request("GET", f"jobs/{j}", user=s).json()["state"] for j, s in zip(ids[1:4], STUDENTS[1:4])]
        assert others == ["running"] * 3  # the well-behaved shares were not disturbed
    finally:
        gate.touch()
    for j, s in zip(ids[1:], STUDENTS[1:]):
        srv.wait_for_job(j, "succeeded", user=s)
