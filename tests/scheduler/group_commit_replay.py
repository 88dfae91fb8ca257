"""The replay behind the group-commit property tests (test_core_group_commit.py for the core,
test_core_overflow_group_commit.py for the overflow wrapper): two schedulers get the same random calls;
``grouped`` submits through ``submit_if_waiting`` (falling back to ``submit`` when it declines), ``plain``
through ``submit`` only; their decisions and fingerprints must stay identical, and a batch submitted
tentatively and withdrawn must leave no trace."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from core_helpers import check_invariants, job
from hive_scheduler import RequestError


def decisions(ds):
    return [d.to_json() for d in ds]


def request(step, n, vcs):
    _, vi, g, count, prio, lazy = step
    return job(f"j{n}", vcs[vi % len(vcs)], g, count, prio, user=f"u{n % 3}", lazy_preemption=lazy)


def replay(grouped: Any, plain: Any, steps: list, vcs: list[str], *, limited: bool, backfill: bool,
           fingerprint: Callable[[Any], Any], core: Callable[[Any], Any] = lambda s: s,
           finishable: Callable[[Any], list[str]] | None = None, owner: Callable[[str], str] = lambda j: j) -> None:
    """``core(s)``: the ``Scheduler`` inside ``s``; ``finishable(plain)``: the ids ``finish`` may pick
    (default: the core's jobs); ``owner(core id)``: the id the driver calls ``preemption_done`` with."""
    for s in (grouped, plain):
        s.backfill = backfill
        if limited:  # per-user limits: a job over its owner's limit waits with that reason either way
            for vc in vcs:
                s.set_user_limits(vc, {"default": {"max_gpus": 4, "max_running_jobs": 2}}, 0.0)
    t, n = 0.0, 0
    for step in steps:
        t += 1
        op = step[0]
        if op == "submit":
            n += 1
            req = request(step, n, vcs)
            try:
                expected = plain.submit(req, t)
            except RequestError:
                with pytest.raises(RequestError):
                    grouped.submit_if_waiting(req, t)
                continue
            before = fingerprint(grouped)
            queued = grouped.submit_if_waiting(req, t)
            if queued is None:
                assert fingerprint(grouped) == before, "declining must change nothing"
                got = grouped.submit(req, t)
            else:
                got = [queued]
            assert decisions(got) == decisions(expected)
        elif op == "finish":
            known = finishable(plain) if finishable is not None else list(core(plain)._jobs)
            if known:
                jid = known[step[1] % len(known)]
                assert decisions(grouped.finish(jid, t)) == decisions(plain.finish(jid, t))
        elif op == "stop":
            pending = [owner(jid) for jid, j in core(plain)._jobs.items() if j.preempted_by is not None]
            if pending:
                jid = pending[step[1] % len(pending)]
                assert decisions(grouped.preemption_done(jid, t)) == decisions(plain.preemption_done(jid, t))
        elif op == "withdrawn batch":
            core(plain).begin_call(t)  # the batch's calls saw this time (fair-share usage is advanced by time)
            before = fingerprint(grouped)
            tentative = []
            for sub in step[1]:
                n += 1
                try:
                    queued = grouped.submit_if_waiting(request(sub, n, vcs), t)
                except RequestError:
                    continue
                if queued is None:
                    break  # the service stores the rest first, then submits them: never withdrawn
                tentative.append(queued.job)
            grouped.withdraw_waiting(tentative)
            assert fingerprint(grouped) == before, "a withdrawn batch must leave no trace"
        assert fingerprint(grouped) == fingerprint(plain)
        check_invariants(core(grouped))
