"""In-VC ordering policies (fifo, priority, drf) and determinism."""

import json
import os
import subprocess
import sys

import pytest

from core_helpers import SMALL, events, job
from hive_scheduler import ConfigError, Scheduler


def fill_b(s, user="ann", n=8, prio=100):
    for i in range(n):
        s.submit(job(f"{user}{i}", "b", 1, user=user, priority=prio), 0)


def test_fifo_starts_in_submit_order():
    s = Scheduler(SMALL)
    fill_b(s)
    s.submit(job("x", "b", 1, priority=5), 1)
    s.submit(job("y", "b", 1, priority=5), 2)
    assert events(s.finish("ann0", 3)) == [("finished", "ann0"), ("started", "x", False)]
    assert s.job("y").reason == "VC b is using 8/8 guaranteed GPUs"
    # in FIFO order a higher priority still preempts: z takes x's place at once
    assert events(s.submit(job("z", "b", 1, priority=50), 4)) == [("demoted", "x"), ("preempting", "z", ["x"])]


def test_priority_policy_starts_highest_first():
    s = Scheduler(SMALL, policy="priority")
    fill_b(s)
    s.submit(job("x", "b", 1, priority=5), 1)
    s.submit(job("y", "b", 1, priority=50), 2)
    assert [j.id for j in s.jobs() if j.state == "waiting"] == ["y", "x"]
    assert s.job("x").reason == "VC b is using 8/8 guaranteed GPUs; 1 job ahead"
    assert events(s.finish("ann0", 3)) == [("finished", "ann0"), ("started", "y", False)]


def test_drf_prefers_the_user_with_the_smallest_dominant_share():
    s = Scheduler(SMALL, policy="drf")
    fill_b(s, "ann", 6)
    s.submit(job("bob0", "b", 1, user="bob", priority=100), 0)
    s.submit(job("bob1", "b", 1, user="bob", priority=100), 0)
    s.submit(job("ann9", "b", 1, user="ann", priority=100), 1)
    s.submit(job("bob9", "b", 1, user="bob", priority=100), 2)
    assert [j.id for j in s.jobs() if j.state == "waiting"] == ["bob9", "ann9"]
    assert events(s.finish("ann0", 3)) == [("finished", "ann0"), ("started", "bob9", False)]
    # CPU counts too: a user holding many CPUs has the larger dominant share
    s2 = Scheduler(SMALL, policy="drf")
    s2.submit(job("c0", "b", 1, user="cpu", cpus=30, priority=100), 0)
    for i in range(7):
        s2.submit(job(f"g{i}", "b", 1, user="gpu", priority=100), 0)
    s2.submit(job("c1", "b", 1, user="cpu", priority=100), 1)
    s2.submit(job("g9", "b", 1, user="gpu", priority=100), 2)
    assert events(s2.finish("g0", 3)) == [("finished", "g0"), ("started", "g9", False)]


def test_unknown_policy():
    with pytest.raises(ConfigError, match="^policy: unknown policy 'lifo'"):
        Scheduler(SMALL, policy="lifo")


SCRIPT = r"""
import json, random, sys
sys.path.insert(0, sys.argv[1])
from core_helpers import SMALL, job
from hive_scheduler import Scheduler, RequestError
rng = random.Random(5)
s = Scheduler(SMALL, policy=sys.argv[2])
out, live, t = [], [], 0.0
for i in range(300):
    t += 1
    r = rng.random()
    if r < 0.55 or not live:
        vc = rng.choice(["a", "b", "c"])
        g = rng.choice([1, 1, 2, 4, 8]) if vc != "c" else rng.choice([1, 2, 4])
        try:
            ds = s.submit(job(f"j{i}", vc, g, rng.choice([1, 1, 2]), rng.choice([-1, 0, 0, 5, 50]),
                              user=rng.choice("xyz"), lazy_preemption=rng.random() < 0.5), t)
        except RequestError as e:
            out.append({"rejected": f"j{i}", "field": e.field})
            continue
    elif r < 0.9:
        ds = s.finish(live.pop(rng.randrange(len(live))), t)
    else:
        ds = s.set_gpu_health("node-%d" % rng.randrange(4), rng.randrange(8), rng.random() < 0.5, t)
    pending = list(ds)
    while pending:
        d = pending.pop(0)
        out.append(d.to_json())
        if d.event == "started":
            live.append(d.job)
        elif d.event in ("finished", "preempted") and d.job in live:
            live.remove(d.job)
        elif d.event == "preempting":
            for v in d.victims:
                try:
                    pending.extend(s.preemption_done(v, t))
                except RequestError:
                    pass
print(json.dumps(out))
"""


@pytest.mark.parametrize("policy", ["fifo", "drf"])
def test_same_calls_same_decisions_whatever_the_hash_seed(policy):
    here = os.path.dirname(__file__)
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", SCRIPT, here, policy], env=env, capture_output=True, text=True,
                           check=True)
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]
    assert len(outs[0]) > 300
    kinds = {d.get("event") for d in outs[0]}
    assert {"started", "queued", "finished", "preempting", "preempted"} <= kinds
