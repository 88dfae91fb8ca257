"""``hive-lab simulate`` end to end, as a user runs it (the installed console script, in a subprocess)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from hive_scheduler.sim import samples

REPO = pathlib.Path(__file__).resolve().parents[2]
HIVE_LAB = REPO / ".venv" / "bin" / "hive-lab"
PHILLY_DEV = pathlib.Path(samples.PHILLY_DEV)


def hive_lab(*args: str, cwd: pathlib.Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [str(HIVE_LAB)] if HIVE_LAB.exists() else [sys.executable, "-m", "hive_lab.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=cwd, timeout=120, env=env)


EVENTS = [
    {"t": 0, "op": "submit", "job": "a", "vc": "default", "priority": 0, "user": "ann",
     "tasks": [{"name": "w", "count": 1, "gpus": 2}], "duration": 100},
    {"t": 5, "op": "submit", "job": "b", "vc": "default", "priority": 0, "user": "bob",
     "tasks": [{"name": "w", "count": 1, "gpus": 4}], "duration": 50},
    {"t": 10, "op": "submit", "job": "c", "vc": "default", "tasks": [{"name": "w", "count": 1, "gpus": 1}]},
    {"t": 20, "op": "finish", "job": "c"},
]


@pytest.fixture
def events_file(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return path


def test_events_replay_prints_a_table_and_writes_decisions(events_file, tmp_path):
    out = tmp_path / "decisions.jsonl"
    proc = hive_lab("simulate", "--cluster", "default", "--events", str(events_file), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for label in ("hived", "JCT average", "queueing delay p95", "GPU utilisation", "sharing anomaly"):
        assert label in proc.stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(d["t"], d["job"], d["event"]) for d in lines if d["job"] == "a"] == [(0, "a", "started"), (100, "a", "finished")]
    b = [d for d in lines if d["job"] == "b"]
    assert b[0]["event"] == "queued" and b[0]["reason"]
    assert b[-1] == {"t": 150, "job": "b", "event": "finished"}
    started = next(d for d in lines if d["event"] == "started")
    assert set(started) == {"t", "job", "event", "placement", "opportunistic"}
    assert set(started["placement"][0]) == {"task", "node", "gpus"}


def test_json_output_for_several_policies_and_one_file_per_policy(events_file, tmp_path):
    out = tmp_path / "run.jsonl"
    proc = hive_lab("simulate", "--cluster", "default", "--events", str(events_file), "--policy", "hived,quota,fifo",
                    "--out", str(out), "--json", "--grace", "5", "--order", "priority")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["grace"], doc["order"]) == (5.0, "priority")
    assert list(doc["policies"]) == ["hived", "quota", "fifo"]
    # a runs 0..100; b (4 GPUs) waits for a and runs 100..150; c (1 GPU) fits beside a at t=10 and is
    # ended by its finish at t=20, except under strict fifo where it waits behind b and is withdrawn
    expected = {"hived": (3, 100.0), "quota": (3, 100.0), "fifo": (2, 122.5)}
    for policy, metrics in doc["policies"].items():
        assert metrics["jobs"] == 3
        assert (metrics["finished"], metrics["median_jct_s"]) == expected[policy]
        path = tmp_path / f"run.{policy}.jsonl"
        assert doc["decisions"][policy] == str(path)
        assert path.read_text().count("\n") >= 5


def test_trace_slice_on_philly(tmp_path):
    slice_path = tmp_path / "philly-200.csv"
    with open(PHILLY_DEV) as fh:
        slice_path.write_text("".join(line for _, line in zip(range(201), fh)))
    out = tmp_path / "d.jsonl"
    proc = hive_lab("simulate", "--cluster", "philly", "--trace", str(slice_path), "--policy", "hived,quota",
                    "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    for policy in ("hived", "quota"):
        m = doc["policies"][policy]
        assert m["jobs"] == 200 and m["finished"] + m["rejected"] + m["unfinished"] == 200
        assert m["finished"] > 190
        decisions = [json.loads(line) for line in (tmp_path / f"d.{policy}.jsonl").read_text().splitlines()]
        assert sum(d["event"] == "finished" for d in decisions) == m["finished"]


def test_time_scale_compresses_trace_arrivals(tmp_path):
    slice_path = tmp_path / "philly-50.csv"
    with open(PHILLY_DEV) as fh:
        rows = [line for _, line in zip(range(51), fh)]
    slice_path.write_text("".join(rows))
    last_submit = int(rows[-1].split(",")[1])
    out = tmp_path / "d.jsonl"
    proc = hive_lab("simulate", "--cluster", "philly", "--trace", str(slice_path), "--time-scale", "0.01",
                    "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["time_scale"] == 0.01
    starts = [json.loads(line)["t"] for line in out.read_text().splitlines() if '"started"' in line]
    assert len(starts) == 50 and max(starts) == pytest.approx(last_submit * 0.01)
    proc = hive_lab("simulate", "--cluster", "default", "--events", str(out), "--time-scale", "0.5")
    assert proc.returncode == 2 and "--time-scale applies to --trace only" in proc.stderr


def test_decisions_do_not_depend_on_the_process_hash_seed(tmp_path):
    import os
    import random

    rng = random.Random(5)
    lines, t = [], 0
    for i in range(150):
        t += rng.choice([0, 1, 7, 30])
        gpus, count = rng.choice([(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (8, 4)])
        lines.append(json.dumps({"t": t, "op": "submit", "job": f"job-{rng.randrange(10**9)}-{i}",
                                 "vc": rng.choice(["6214e9", "7f04ca", "ed69ec", "103959"]),
                                 "priority": rng.choice([-1, 0, 0, 10]), "user": f"user{rng.randrange(5)}",
                                 "tasks": [{"name": "w", "count": count, "gpus": gpus}],
                                 "duration": rng.randint(10, 5000)}))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n")
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed{seed}.jsonl"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = hive_lab("simulate", "--cluster", "philly", "--events", str(events), "--policy", "hived,quota,fifo",
                        "--grace", "10", "--out", str(out), "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        outputs.append([(tmp_path / f"seed{seed}.{p}.jsonl").read_bytes() for p in ("hived", "quota", "fifo")])
    assert outputs[0] == outputs[1]
    assert all(len(o.splitlines()) > 150 for o in outputs[0])


ANOMALY_CLUSTER = {
    "physicalCluster": {
        "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "G-NODE", "cellAddress": "n1"}, {"cellType": "G-NODE", "cellAddress": "n2"}],
    },
    "virtualClusters": {vc: {"virtualCells": [{"cellType": "G-NODE", "cellNumber": 1}]} for vc in ("A", "B")},
}
ANOMALY_EVENTS = [
    {"t": 0, "op": "submit", "job": "a1", "vc": "A", "tasks": [{"name": "w", "count": 1, "gpus": 2}], "duration": 100},
    {"t": 1, "op": "submit", "job": "b1", "vc": "B", "tasks": [{"name": "w", "count": 1, "gpus": 3}], "duration": 100},
    {"t": 2, "op": "submit", "job": "b2", "vc": "B", "tasks": [{"name": "w", "count": 1, "gpus": 1}], "duration": 100},
    {"t": 3, "op": "submit", "job": "a2", "vc": "A", "tasks": [{"name": "w", "count": 1, "gpus": 2}], "duration": 10},
]


def test_anomaly_against_private_per_vc_table_and_json(tmp_path):
    cluster = tmp_path / "two.json"
    cluster.write_text(json.dumps(ANOMALY_CLUSTER))
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in ANOMALY_EVENTS))
    base = ["simulate", "--cluster", str(cluster), "--events", str(events), "--policy", "hived,quota,private"]
    proc = hive_lab(*base, "--by-vc")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in proc.stdout.splitlines() if line.startswith("│ A ") or line.startswith("│ B ")}
    # VC, jobs, private, hived, quota: quota's a2 waited 97 s that A's private node would not have made it wait
    assert rows["A"] == ["2", "0.0 s", "0.0 s", "48.5 s (+97.0 s, 1)"]
    assert rows["B"] == ["2", "0.0 s", "0.0 s", "0.0 s"]
    doc = json.loads(hive_lab(*base, "--json").stdout)
    assert doc["anomaly_reference"] == "private"
    assert {p: (m["sharing_anomaly_s"], m["sharing_anomaly_jobs"]) for p, m in doc["policies"].items()} == {
        "hived": (0, 0), "quota": (97, 1), "private": (0, 0)}
    assert doc["policies"]["quota"]["by_vc"]["A"] == {"jobs": 2, "avg_queue_s": 48.5, "sharing_anomaly_s": 97,
                                                      "sharing_anomaly_jobs": 1}
    off = json.loads(hive_lab(*base, "--json", "--no-anomaly").stdout)
    assert off["anomaly_reference"] is None and off["policies"]["quota"]["sharing_anomaly_s"] is None


def test_the_philly_sample_ships_inside_the_repository_with_its_licence():
    proc = hive_lab("simulate", "--help")
    assert proc.returncode == 0 and "--trace" in proc.stdout and "--grace" in proc.stdout
    assert REPO in PHILLY_DEV.resolve().parents, "a clone of the repository alone must hold the tests' data"
    assert len(PHILLY_DEV.read_text().splitlines()) == 2001
    note = (PHILLY_DEV.parent / "README.md").read_text()
    assert "CC BY 4.0" in note and "USENIX ATC '19" in note


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "hived,lottery"], "unknown lottery"),
        (["--grace", "-1"], "--grace must be >= 0"),
        (["--cluster", "no-such-model"], "--cluster no-such-model"),
    ],
)
def test_bad_arguments_say_what_to_fix(events_file, args, message):
    base = {"--cluster": "default", "--events": str(events_file)}
    argv = ["simulate"]
    for key, value in base.items():
        if key not in args:
            argv += [key, value]
    proc = hive_lab(*argv, *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_bad_event_file_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(EVENTS[0]) + "\n" + '{"t":1,"op":"submit","job":"x","vc":"default","tasks":[]}\n')
    proc = hive_lab("simulate", "--cluster", "default", "--events", str(bad))
    assert proc.returncode == 2
    assert "bad.jsonl line 2: submit: 'tasks' must be a non-empty list" in proc.stderr
