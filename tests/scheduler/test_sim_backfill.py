"""The simulator's backfill switches: ``time_limit_s`` on submit events, ``--time-limits`` for traces,
``--queueing``/``--backfill`` in ``hive-lab simulate`` (the console script, in a subprocess)."""

from __future__ import annotations

import json

import pytest

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import load_trace, simulate
from hive_scheduler.sim.events import EventError, parse_events
from test_sim_cli import PHILLY_DEV, hive_lab

# the hand-solved scenario of test_core_backfill.py as an event script: r holds 2 of 4 GPUs until 100, the
# gang (2 x 2 GPUs) waits for them; "short" (limit 50) backfills at 10, "long" (limit 500) waits for the gang
EVENTS = [
    {"t": 0, "op": "submit", "job": "r", "vc": "default", "tasks": [{"name": "w", "count": 1, "gpus": 2}],
     "duration": 100, "time_limit_s": 100},
    {"t": 1, "op": "submit", "job": "gang", "vc": "default", "tasks": [{"name": "w", "count": 2, "gpus": 2}],
     "duration": 50, "time_limit_s": 50},
    {"t": 10, "op": "submit", "job": "short", "vc": "default", "tasks": [{"name": "w", "count": 1, "gpus": 1}],
     "duration": 50, "time_limit_s": 50},
    {"t": 10, "op": "submit", "job": "long", "vc": "default", "tasks": [{"name": "w", "count": 1, "gpus": 1}],
     "duration": 500, "time_limit_s": 500},
]
CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"]}


def starts(result) -> dict[str, float]:
    return {d["job"]: d["t"] for d in result.decisions if d["event"] == "started"}


def test_replay_with_and_without_backfill():
    events = parse_events([json.dumps(e) for e in EVENTS])
    back = simulate(CLUSTER, events, queueing="backfill", anomaly=False, overflow=False)
    assert starts(back) == {"r": 0, "short": 10, "gang": 100, "long": 150}
    skip = simulate(CLUSTER, events, anomaly=False, overflow=False)
    assert starts(skip) == {"r": 0, "short": 10, "long": 10, "gang": 510}
    strict = simulate(CLUSTER, events, queueing="strict", anomaly=False, overflow=False)
    assert starts(strict) == {"r": 0, "gang": 100, "short": 150, "long": 150}


def test_time_limit_field_is_checked():
    bad = dict(EVENTS[0], time_limit_s=0)
    with pytest.raises(EventError) as e:
        parse_events([json.dumps(bad)])
    assert "'time_limit_s' must be a number of seconds > 0" in str(e.value)
    assert parse_events([json.dumps(EVENTS[0])])[0].to_dict()["time_limit_s"] == 100


def test_trace_time_limits_scale_durations():
    config = load_cluster_config("philly")
    plain = load_trace(PHILLY_DEV, config)[:3]
    twice = load_trace(PHILLY_DEV, config, time_limits=2)[:3]
    assert all(e.time_limit_s is None for e in plain)
    assert [e.time_limit_s for e in twice] == [2 * e.duration for e in plain]
    with pytest.raises(ValueError):
        load_trace(PHILLY_DEV, config, time_limits=0.5)


def test_cli_backfill_flag(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    cfg = tmp_path / "cluster.json"
    cfg.write_text(json.dumps(CLUSTER))
    r = hive_lab("simulate", "--cluster", str(cfg), "--events", str(path), "--backfill", "--no-overflow",
                 "--no-anomaly", "--json", "--out", str(tmp_path / "d.jsonl"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["queueing"] == "backfill"
    lines = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert {d["job"]: d["t"] for d in lines if d["event"] == "started"}["gang"] == 100
    r = hive_lab("simulate", "--cluster", str(cfg), "--events", str(path), "--time-limits", "2")
    assert r.returncode == 2 and "--time-limits applies to --trace" in r.stderr
