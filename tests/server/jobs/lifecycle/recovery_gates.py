"""The real local launcher with a hook that lets a recovery test pick the moment something happens.

Neither class changes what the launcher reports: every answer is the real ``LocalLauncher``'s; they
only hold recovery at a gate, or make a real task exit at a chosen point between two launcher calls.
"""

from __future__ import annotations

import asyncio
import os
import pathlib

from hive_lab_server.execution.launchers.local import LocalLauncher

__all__ = ["GatedLocalLauncher", "ExitBetweenCallsLauncher"]


class GatedLocalLauncher(LocalLauncher):
    """Its first ``running()`` (the start of the service's recovery) waits until the file named by
    ``$HIVE_TEST_RECOVERY_GATE`` exists; while it waits, ``<gate>.waiting`` exists. Used by a real
    server (``--HiveLabApp.launcher=recovery_gates:GatedLocalLauncher``)."""

    def __init__(self, state_dir, **kwargs):
        super().__init__(state_dir, **kwargs)
        self._gate = os.environ.get("HIVE_TEST_RECOVERY_GATE")
        self._checked = False

    async def running(self) -> dict[str, set[str]]:
        if self._gate and not self._checked:
            self._checked = True
            gate = pathlib.Path(self._gate)
            if not gate.exists():
                waiting = pathlib.Path(f"{gate}.waiting")
                waiting.touch()
                while not gate.exists():
                    await asyncio.sleep(0.02)
                waiting.unlink(missing_ok=True)
        return await super().running()


class ExitBetweenCallsLauncher(LocalLauncher):
    """After ``adopt`` of ``job_id``, the next ``poll()`` or ``running()`` computes its real answer,
    then lets the job's task finish (creates ``go_file``, which the task waits for) and waits until
    the process is gone before answering: the task ends exactly between that call and the next."""

    def __init__(self, state_dir, *, job_id: str, go_file: pathlib.Path, **kwargs):
        super().__init__(state_dir, **kwargs)
        self.job_id = job_id
        self.go_file = pathlib.Path(go_file)
        self.armed = False
        self.calls: list[str] = []

    async def adopt(self, request):
        await super().adopt(request)
        if request.job_id == self.job_id and not self.go_file.exists():
            self.armed = True

    async def _then_end_the_task(self) -> None:
        if not self.armed:
            return
        self.armed = False
        tasks = list(self._tasks.get(self.job_id, {}).values())
        assert tasks, "the job was not adopted"
        self.go_file.touch()
        for _ in range(1000):
            if not any(self._alive(t) for t in tasks):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"the task of {self.job_id} did not end")

    async def poll(self):
        out = await super().poll()
        self.calls.append("poll")
        await self._then_end_the_task()
        return out

    async def running(self):
        out = await super().running()
        self.calls.append("running")
        await self._then_end_the_task()
        return out
