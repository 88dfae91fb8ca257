"""What a part of the service needs of the unit of work (``shell.UnitOfWork``), as a small protocol:
parts are handed the unit of work, never the service, and depend only on this. Also the small things
the unit of work and admission are handed that are not parts of their own: the job's REST view
(``JobViews``: the service answers it), where events go (``EventSink``: ``wire.events.EventBus``) and
the dependency gate (``DependencyGate``: ``pipelines.dependencies.Dependencies``, which imports the
lifecycle, so the lifecycle names it only by this)."""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from hive_lab_server.jobs.lifecycle import machine as m

Facts = list[tuple[str, m.Event]]


class Work(Protocol):
    def now(self) -> float:
        """The service's clock (never goes back)."""

    def unit(self, facts: Facts, *, request: bool = False, exits: Sequence[Any] = (),
             write: Callable[[Any, float], None] | None = None,
             committed: Callable[[], None] | None = None) -> list[str]:
        """Apply ``facts`` in one transaction, then run their effects (``shell.UnitOfWork.unit``)."""

    def facts_of(self, decisions: list, submitted: str | None = None) -> Facts:
        """The core's decisions as lifecycle facts."""

    async def settle(self, job_id: str, wait_s: float) -> None:
        """Wait (at most ``wait_s``) for the job's running operation (a stop, a launch) to end."""

    def publish(self, job_ids: list[str], cluster: bool = False, fresh: dict[str, dict] | None = None) -> None:
        """Tell the live UIs (after a commit)."""


class GateWork(Work, Protocol):
    """What the dependency gate needs on top: a job whose dependencies are met goes to the core."""

    def submit_to_core(self, job_id: str) -> Facts:
        """Hand an unfinished job to the core (through the gate); its decisions as facts."""


class RecoveryWork(Work, Protocol):
    """What recovery needs on top: the running attempts' deadlines, the launcher's exits as facts,
    and the adoptions its facts started."""

    def watch_deadline(self, job_id: str, deadline: float) -> None:
        """Stop the job (``TimeUp``) once ``deadline`` passed."""

    def check_deadlines(self) -> list[str]:
        """Apply ``TimeUp`` to the running jobs whose deadline passed."""

    def handle_exits(self, exits: list[Any]) -> None:
        """The launcher's exits as facts, in one unit."""

    async def adopted(self) -> None:
        """Wait for the adoptions the last units started (tasks that ran on through a restart)."""


class DependencyGate(Protocol):
    """What admission and the unit of work ask of ``depends_on`` (``pipelines.dependencies.Dependencies``)."""

    held: set[str]  # queued jobs kept out of the core until their dependencies are met

    def gate(self, job: Any) -> Facts | None:
        """Before a job goes to the core: None (go on), else the facts that keep it out or end it."""


class JobViews(Protocol):
    """The REST view of a job (``HiveService.job_object``, built by ``lifecycle.presentation``)."""

    def job_object(self, job_id: str, *, detail: bool, private: bool, row: dict[str, Any] | None = None,
                   placement: list[dict[str, Any]] | None = None, live_reason: bool = True) -> dict[str, Any]:
        """The job's REST object (ServiceError(404) when there is no such job)."""


class EventSink(Protocol):
    """Where the live UIs' events go (``wire.events.EventBus``)."""

    @property
    def subscriber_count(self) -> int:
        """How many listen now (none: nothing need be built to publish)."""

    def publish(self, message: dict) -> None:
        """Send ``message`` to every subscriber."""
