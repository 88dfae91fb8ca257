"""The training-like job that checkpoints, shared by the tests that pause, migrate, resize (jobs/lifecycle/
test_checkpoint_live.py) and grow-shrink it (timeshare/test_rounds_elastic.py): the mixed cluster it runs on,
its script and the result an uninterrupted run of ``total`` steps ends with."""

from __future__ import annotations

import hashlib

__all__ = ["MIXED", "TRAIN", "expected"]

MIXED = {
    "physicalCluster": {
        "cellTypes": {
            "K80-NODE": {"childCellType": "K80", "childCellNumber": 2, "isNodeLevel": True},
            "V100-NODE": {"childCellType": "V100", "childCellNumber": 2, "isNodeLevel": True},
        },
        "physicalCells": [{"cellType": "K80-NODE", "cellAddress": "k80-node"},
                          {"cellType": "V100-NODE", "cellAddress": "v100-node"}],
    },
    "virtualClusters": {"lab": {"virtualCells": [{"cellType": "K80-NODE", "cellNumber": 1},
                                                 {"cellType": "V100-NODE", "cellNumber": 1}]}},
}

# Steps are a hash chain (the result depends on every step being done exactly once, in order). The
# state is checkpointed on SIGUSR1 only (then the job exits): the job declares checkpoint: true.
TRAIN = r'''
import hashlib, json, os, pathlib, signal, sys, time
try:
    from hive_lab import progress
except ImportError:  # (an image without hive-lab) the same line by hand
    def progress(steps, t):
        print(f"hive-progress: steps={steps} t={t:.3f} attempt={os.environ['HIVE_ATTEMPT']} "
              f"gpu_type={os.environ['HIVE_GPU_TYPE']}", flush=True)
# a simulated GPU: each step "takes" 0.1 s on a K80 and 0.025 s on a V100 (reported as t, so the
# rates the service learns are exact whatever this machine's speed)
STEP_S = {"K80": 0.1, "V100": 0.025}[os.environ["HIVE_GPU_TYPE"]]
total = int(sys.argv[1])
ck = pathlib.Path(os.environ["HIVE_CHECKPOINT_DIR"]) / "state.json"
out = pathlib.Path(os.environ["HIVE_OUTPUT_DIR"])
allow = pathlib.Path(os.environ["HIVE_WORKING_DIR"]) / "allow"
state = {"step": 0, "acc": "seed", "t": 1000.0}
if os.environ["HIVE_RESUMED"] == "1":
    state = json.loads(ck.read_text())
with open(out / "attempts.jsonl", "a") as f:
    f.write(json.dumps({k: os.environ[k] for k in ("HIVE_ATTEMPT", "HIVE_RESUMED", "HIVE_WORLD_SIZE",
                                                   "CUDA_VISIBLE_DEVICES")} | {"from": state["step"]}) + "\n")
stop = False
def on_checkpoint_signal(*_):
    global stop
    stop = True
signal.signal(signal.SIGUSR1, on_checkpoint_signal)
def save():
    tmp = ck.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, ck)
def allowed():
    try:
        return int(allow.read_text())
    except (OSError, ValueError):
        return 0
reached = -1
while state["step"] < total:
    if stop:
        save()
        sys.exit(0)
    if state["step"] >= allowed():
        if reached != state["step"]:  # tell the test (not a checkpoint: only the signal makes one)
            reached = state["step"]
            (out / "reached.tmp").write_text(str(reached))
            os.replace(out / "reached.tmp", out / "reached")
        time.sleep(0.01)
        continue
    state["acc"] = hashlib.sha256(f'{state["acc"]}:{state["step"]}'.encode()).hexdigest()
    state["step"] += 1
    state["t"] += STEP_S
    progress(state["step"], t=state["t"])
(out / "result.txt").write_text(state["acc"])
'''


def expected(total: int) -> str:
    acc = "seed"
    for step in range(total):
        acc = hashlib.sha256(f"{acc}:{step}".encode()).hexdigest()
    return acc
