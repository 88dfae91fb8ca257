"""Property-based tests: random call sequences, invariants after every step.

After each step: no GPU used twice; gangs all-or-nothing; every VC's guarantee is safe (its unbound
cells still fit the free buddy cells, and its bound cells hold no other VC's guaranteed work, so it
can get all its cells by preempting only opportunistic and its own lower-priority jobs);
opportunistic jobs never cause preemption; no guaranteed job of another VC is ever a victim.
Shares of a GPU (0.5/0.25/0.125) mix in: a shared GPU never holds a whole-GPU job, its eighths are
given once, its shares are all guaranteed jobs of one VC or all opportunistic (core_helpers).
At the end, releasing everything restores the initial state.
"""

import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core_helpers import HIVED_EXAMPLE, MIXED, SMALL, check_invariants, job
from hive_scheduler import RequestError, Scheduler
from hive_scheduler.shares import job_share

SMALL_B = dict(SMALL, vcs={"a": 8, "b": 16, "c": {"cells": {"socket": 2}}})
# node-3 removed (work-preserving: what runs there keeps running, detached)
SMALL_C = dict(SMALL, nodes=["node-0", "node-1", "node-2"], racks=None, vcs={"a": 8, "b": 8, "c": {"cells": {"socket": 2}}})
CLUSTERS = {
    "small": (SMALL, [SMALL_B, SMALL_C], ["a", "b", "c"], ["node-0", "node-1", "node-2", "node-3"], [None, "A100-NODE", "A100-socket"]),
    "hived": (HIVED_EXAMPLE, [], ["VC1", "VC2"], ["n1", "n2"], [None, "V100-NODE", "V100-SWITCH"]),
    "mixed": (MIXED, [], ["v", "k", "mix"], ["m1", "m2", "k1"], [None, "V100-NODE", "K80-NODE"]),
}
GPU_TYPES = {"small": [None], "hived": [None], "mixed": [None, "V100", "K80"]}

submit = st.tuples(st.just("submit"), st.integers(0, 2), st.sampled_from([1, 1, 2, 3, 4, 8, 0.5, 0.25, 0.25, 0.125]), st.integers(1, 3),
                   st.sampled_from([-1, -1, 0, 0, 5, 50]), st.booleans(), st.integers(0, 2), st.booleans(),
                   st.integers(0, 2))
ops = st.one_of(
    submit, submit, submit,
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("stop"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("gpu"), st.integers(0, 3), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("node"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("reconfigure"), st.booleans()),
    st.tuples(st.just("restart"), st.booleans()),
)


def snapshot(s):
    return {jid: (j.state, j.opp, j.req.vc, j.req.priority) for jid, j in s._jobs.items()}


def check_decisions(s, before, ds, step):
    preemptors = {}
    reconfig_demoted = set()
    for d in ds:
        if d.event == "demoted" and step[0] in ("reconfigure", "restart"):
            reconfig_demoted.add(d.job)  # the new config no longer guarantees it: opportunistic now
        if d.event == "preempting":
            p = s._jobs[d.job]
            assert p.req.priority >= 0, f"opportunistic job {d.job} caused preemption"
            preemptors[d.job] = p
            for v in d.victims:
                state, opp, vc, prio = before.get(v, (None, True, None, None))
                if opp or v in reconfig_demoted:
                    continue  # was running opportunistically already
                assert vc == p.req.vc, f"{d.job} (VC {p.req.vc}) preempts guaranteed {v} of VC {vc}"
                assert prio < p.req.priority, f"{d.job} preempts {v} of equal/higher priority"
        if d.event == "demoted" and step[0] not in ("reconfigure", "restart") and d.job in before:
            state, opp, vc, prio = before[d.job]
            assert any(p.req.vc == vc and p.req.priority > prio for p in s._jobs.values() if p.state != "waiting"), \
                f"{d.job} demoted without a higher-priority job of its VC"


def canonical(s):
    free = {c: {lvl: sorted(d) for lvl, d in b.free.items()} for c, b in s.state.buddies.items()}
    return s.cluster_view(), s.vc_view(), free, s.free_gpu_count()


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=st.sampled_from(sorted(CLUSTERS)), steps=st.lists(ops, min_size=8, max_size=60),
       policy=st.sampled_from(["fifo", "priority", "drf", "fair_share"]))
def test_invariants_hold_after_every_step(cluster, steps, policy):
    config, alt, vcs, nodes, withins = CLUSTERS[cluster]
    s = Scheduler(config, policy=policy, starvation_after=30)
    current = config
    t = 0.0
    n = 0
    victims: list[str] = []
    for step in steps:
        t += 1
        before = snapshot(s)
        ds = []
        op = step[0]
        if op == "submit":
            _, vi, g, count, prio, lazy, wi, pin, ti = step
            vc = vcs[vi % len(vcs)]
            n += 1
            types = GPU_TYPES[cluster]
            kw = {"within": withins[wi], "gpu_type": types[ti % len(types)]}
            if pin and vc == "VC2" and prio >= 0:
                kw = {"pinned_cell": "pin1"}
            if n % 7 == 0:
                g = 0  # a CPU-only task
            if isinstance(g, float):  # a share of one GPU: one task (a gang of shares is refused, tested apart)
                count = 1
                kw["within"] = None
            try:
                ds = s.submit(job(f"j{n}", vc, g, count, prio, user=f"u{n % 3}", lazy_preemption=lazy,
                                  cpus=2 * (n % 3), **kw), t)
            except RequestError:
                assert snapshot(s) == before
                continue
        elif op == "finish":
            ids = list(s._jobs)
            if ids:
                ds = s.finish(ids[step[1] % len(ids)], t)
        elif op == "stop":
            pending = [v for v in victims if v in s._jobs and s._jobs[v].preempted_by is not None]
            if pending:
                ds = s.preemption_done(pending[step[1] % len(pending)], t, requeue=step[2])
        elif op == "gpu" and nodes[step[1] % len(nodes)] in s.state.nodes:
            node = nodes[step[1] % len(nodes)]
            gpus = sorted(s.state.nodes[node].gpu_leaves)
            ds = s.set_gpu_health(node, gpus[step[2] % len(gpus)], step[3], t)
        elif op == "node" and nodes[step[1] % len(nodes)] in s.state.nodes:
            ds = s.set_node_health(nodes[step[1] % len(nodes)], step[2], t)
        elif op == "reconfigure" and alt:
            choices = [config] + alt
            current = choices[(choices.index(current) + 1 + int(step[1])) % len(choices)]
            ds = s.reconfigure(current, t)
        elif op == "restart" and not any(j.detached for j in s._jobs.values()):
            # a server restart: a fresh core adopts what runs and gets the rest submitted again
            s2 = Scheduler(current, policy=policy, starvation_after=30)
            s2.restore_usage(s.usage_snapshot())  # the service stores fair-share usage across restarts
            for node in sorted(s.state.node_down):
                s2.set_node_health(node, False, t)
            for node, g in sorted(s.state.gpu_down):
                s2.set_gpu_health(node, g, False, t)
            for j in sorted(s._jobs.values(), key=lambda j: j.seq):
                if j.state == "running":
                    ds += s2.adopt(j.req, [p.to_dict() for p in j.placement], j.opp, t)
            for j in sorted(s._jobs.values(), key=lambda j: j.seq):
                if j.state != "running":
                    ds += s2.submit(j.req, t)
            for jid, j in s._jobs.items():
                if j.state == "running" and not j.opp:
                    assert not s2._jobs[jid].opp or any(d.event == "demoted" and d.job == jid for d in ds)
            s = s2
            victims = []
        for d in ds:
            event(d.event)
            if d.event == "started" and d.placement and d.placement[0].share:
                event("share started" + (" beside another share" if len(s._jobs[d.job].pleaves[0].shares.holders) > 1
                                         else ""))
            if d.event in ("preempting", "demoted") and any(job_share(s._jobs[v].req) for v in (d.victims or (d.job,))
                                                           if v in s._jobs):
                event(f"share {d.event}")
            if d.event == "preempting":
                victims.extend(d.victims)
        check_decisions(s, before, ds, step)
        check_invariants(s)

    # release everything: hardware back, stop victims, finish all jobs
    for node in nodes:
        if node not in s.state.nodes:
            continue
        s.set_node_health(node, True, t)
        for g in sorted(s.state.nodes[node].gpu_leaves):
            s.set_gpu_health(node, g, True, t)
    while s._jobs:
        s.finish(next(iter(s._jobs)), t)
        check_invariants(s)
    assert canonical(s) == canonical(Scheduler(current, policy=policy))
