"""Live policies that need remaining work (finish_time_fairness*, min_total_duration*) get each job's
remaining steps from its progress lines' ``total`` (rounds.RoundDriver.remaining_steps); a job that
never said its total looks ``REMAINING_STEPS`` long. The real service on the mixed cluster of
test_rounds_resolve, an injected clock; the test calls ``plan()`` itself and reads the Problem the
policy was handed."""

from __future__ import annotations

import asyncio

import pytest

from hive_lab_server.timeshare.rounds import REMAINING_STEPS, RoundDriver
from test_rounds_resolve import _kill_leftovers, make_service, say, submit  # noqa: F401
from waiting import wait_until_async


@pytest.mark.timeout(240)
@pytest.mark.usefixtures("_kill_leftovers")
def test_policy_input_uses_the_remaining_steps(tmp_path):
    async def main():
        svc = make_service(tmp_path)
        svc.rounds = RoundDriver(svc, "finish_time_fairness", round_s=360)
        await svc.start()
        rounds = svc.rounds
        try:
            a = submit(svc)
            b = submit(svc)
            await wait_until_async(lambda: svc.active[a].state == "running" and svc.active[b].state == "running", "both running")
            await say(svc, tmp_path, a, "hive-progress: steps=0 total=1000 t=100 attempt=1 gpu_type=K80")
            await say(svc, tmp_path, a, "hive-progress: steps=300 total=1000 t=110 attempt=1 gpu_type=K80")
            rounds.plan()
            problem = rounds.last_problem["lab"]
            jobs = [j.id for j in rounds.candidates("lab")]
            left = dict(zip(jobs, problem.remaining_steps.tolist()))
            assert left == {a: 700.0, b: REMAINING_STEPS}
            view = svc.progress.view(a, None, 1)
            assert view["total_steps"] == 1000 and view["remaining_steps"] == 700
            assert view["estimated_finish"] == pytest.approx(110 + 700 / 30)
        finally:
            for j in list(svc.active):
                (tmp_path / "jobs" / j / "release").write_text("")
            await svc.stop()

    asyncio.run(main())
