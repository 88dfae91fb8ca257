"""The simulator runs the core's ``fair_share`` order; synthetic users; the ``user_wait_spread`` metric."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from core_helpers import SMALL
from hive_scheduler.sim import load_events, simulate
from hive_scheduler.sim.events import SubmitEvent
from hive_scheduler.sim.metrics import user_wait_spread
from hive_scheduler.sim.shape import cluster_shape
from hive_scheduler.sim.trace import synthetic_user, trace_to_events
from test_sim_cli import PHILLY_DEV, hive_lab


def submit(t, job, user, duration, gpus=1):
    return {"t": t, "op": "submit", "job": job, "vc": "b", "priority": 0, "user": user,
            "tasks": [{"name": "w", "count": 1, "gpus": gpus}], "duration": duration}


@pytest.fixture
def busy_vc(tmp_path):
    # ann fills VC b (8 GPUs); her jobs end at 100, 200, ...; then ann and bob each queue one job
    evs = [submit(0, f"ann{i}", "ann", 100 * (i + 1)) for i in range(8)]
    evs += [submit(1, "ann9", "ann", 10), submit(2, "bob9", "bob", 10)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in evs))
    return path


def test_fair_share_gives_the_freed_gpu_to_the_user_who_used_least(busy_vc):
    fifo = simulate(SMALL, load_events(busy_vc), "hived", order="fifo", anomaly=False, overflow=False)
    fair = simulate(SMALL, load_events(busy_vc), "hived", order="fair_share", anomaly=False, overflow=False)
    assert (fifo.metrics.waits["ann9"], fifo.metrics.waits["bob9"]) == (99.0, 108.0)
    assert (fair.metrics.waits["bob9"], fair.metrics.waits["ann9"]) == (98.0, 109.0)


def test_user_wait_spread_by_hand():
    subs = [SubmitEvent(t=0, job=j, vc="b", tasks=(), user=u) for j, u in
            [("a1", "ann"), ("a2", "ann"), ("b1", "bob"), ("c1", "cem")]]
    sp = user_wait_spread(subs, {"a1": 10.0, "a2": 30.0, "b1": 5.0, "c1": 100.0})
    # users' averages: ann 20, bob 5, cem 100 -> median 20, p95 = 20 + 0.9 * 80 = 92, max 100
    assert sp["users"] == 3 and sp["median_s"] == 20.0 and sp["max_s"] == 100.0
    assert sp["p95_s"] == pytest.approx(92.0)
    assert sp["p95_over_median"] == pytest.approx(4.6) and sp["max_over_median"] == pytest.approx(5.0)
    assert user_wait_spread(subs[:2], {}) is None  # one user: no spread
    assert user_wait_spread(subs, {})["p95_over_median"] is None  # median 0: no ratio


def test_synthetic_users_are_a_stable_hash_of_the_job_id():
    assert synthetic_user("10726", 20) == synthetic_user("10726", 20)
    assert {synthetic_user(str(i), 20) for i in range(400)} == {f"user-{k:02d}" for k in range(20)}
    csv = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status\n1,0,10,1,,b,,\n2,5,10,1,,b,kim,\n"
    shape = cluster_shape(SMALL)
    evs = trace_to_events(io.StringIO(csv), shape, synthetic_users=5)
    assert [e.user for e in evs] == [synthetic_user("1", 5), synthetic_user("2", 5)]
    assert [e.user for e in trace_to_events(io.StringIO(csv), shape)] == ["", "kim"]
    code = "from hive_scheduler.sim.trace import synthetic_user; print([synthetic_user(str(i), 20) for i in range(50)])"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=s)).stdout for s in ("0", "7")}
    assert len(outs) == 1


def test_cli_order_fair_share_with_synthetic_users(tmp_path):
    head = PHILLY_DEV.read_text().splitlines()[:201]
    trace = tmp_path / "philly-200.csv"
    trace.write_text("\n".join(head) + "\n")
    r = hive_lab("simulate", "--cluster", "philly", "--trace", str(trace), "--time-scale", "0.001",
                 "--synthetic-users", "20", "--order", "fair_share", "--no-anomaly", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["order"] == "fair_share" and doc["synthetic_users"] == 20
    spread = doc["policies"]["hived"]["user_wait_spread"]
    assert spread["users"] == 20 and spread["max_s"] >= spread["p95_s"] >= spread["median_s"] >= 0
    r = hive_lab("simulate", "--cluster", "philly", "--trace", str(trace), "--time-scale", "0.001",
                 "--synthetic-users", "20", "--no-anomaly")
    assert r.returncode == 0 and "user_wait_spread (hived, 20 users): p95/median" in r.stdout.replace("\n", " ")


def test_cli_refuses_unknown_orders_naming_the_registry(tmp_path):
    r = hive_lab("simulate", "--cluster", "philly", "--trace", str(PHILLY_DEV), "--order", "lottery")
    assert r.returncode == 2
    assert "--order: unknown 'lottery'; choose from fifo, priority, drf, fair_share" in r.stderr
    r = hive_lab("simulate", "--cluster", "philly", "--trace", str(PHILLY_DEV), "--synthetic-users", "0")
    assert r.returncode == 2 and "--synthetic-users" in r.stderr
