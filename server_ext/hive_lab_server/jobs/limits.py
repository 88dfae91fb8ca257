"""Per-user limits of the VCs in the service: from the config (``HiveLabApp.user_limits``) and from the
store (``PUT vcs/{vc}/limits``, which replaces the config's limits of that VC), handed to the core's
admission gate (``Scheduler.set_user_limits``). The rules themselves live in ``hive_scheduler.limits``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from hive_scheduler.limits import LimitsError, LimitTable

from hive_lab_server.errors import ServiceError
from hive_lab_server.jobs.lifecycle.work import Work

if TYPE_CHECKING:
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.store import Store

log = logging.getLogger("hive_lab_server")

__all__ = ["LimitsError", "Limits", "parse_config", "parse_body", "limits_document"]


def parse_config(config: Mapping[str, Any] | None, vcs: Iterable[str]) -> dict[str, LimitTable]:
    """``HiveLabApp.user_limits`` checked whole: LimitsError naming the VC and key when it is malformed."""
    known = list(vcs)
    out: dict[str, LimitTable] = {}
    for vc, body in (config or {}).items():
        if vc not in known:
            raise LimitsError(f"user_limits: VC {vc!r} does not exist; the VCs are {', '.join(known)}", vc)
        try:
            out[vc] = LimitTable.from_dict(body)
        except LimitsError as exc:
            raise LimitsError(f"user_limits[{vc!r}]: {exc.message}", f"{vc}.{exc.field}" if exc.field else vc) from None
    return out


def parse_body(body: Any) -> LimitTable:
    """A ``PUT vcs/{vc}/limits`` body; LimitsError (400) naming the key when anything is wrong."""
    return LimitTable.from_dict(body)


def limits_document(vc: str, table: LimitTable, source: str) -> dict[str, Any]:
    """The REST form of a VC's limits (``source``: ``store``, ``config`` or ``none``)."""
    return {"vc": vc, **table.to_dict(), "source": source}


class Limits:
    """The VCs' per-user limits in the service: loaded from the config and the store into the core at
    start, read and replaced through REST (``PUT vcs/{vc}/limits``: stored, then applied).

    ``config_limits``: the parsed ``HiveLabApp.user_limits``; the store's limits of a VC replace them."""

    def __init__(self, *, vcs: Iterable[str], core: LiveSchedulerCore, store: Store, work: Work,
                 config_limits: Mapping[str, LimitTable] | None = None):
        self.vcs = vcs
        self.core = core
        self.store = store
        self.work = work
        self.config_limits = dict(config_limits or {})

    def load(self) -> None:
        """Hand the config's and the store's limits to the core (at start, before recovery queues jobs)."""
        stored = self.store.vc_limits()
        for vc in self.vcs:
            body = stored.get(vc)
            try:
                table = LimitTable.from_dict(body) if body is not None else self.config_limits.get(vc)
            except LimitsError as exc:  # not written by this version: keep the config's, say so
                log.warning("hive-lab: stored limits of VC %s are not valid (%s); using the config's", vc, exc)
                table = self.config_limits.get(vc)
            if table:
                self.core.set_user_limits(vc, table, self.work.now())

    def source(self, vc: str) -> str:
        if vc in self.store.vc_limits():
            return "store"
        return "config" if vc in self.config_limits else "none"

    def limits_object(self, vc: str) -> dict[str, Any]:
        if vc not in self.vcs:
            raise ServiceError(404, f"VC {vc} does not exist; see GET vcs")
        return limits_document(vc, self.core.user_limits(vc), self.source(vc))

    def set_limits(self, vc: str, body: Any, by: str) -> dict[str, Any]:
        """Replace VC ``vc``'s limits: checked whole (400 naming the key), stored (503 if the store refuses:
        nothing changes), then applied at once (jobs waiting on a raised limit start)."""
        if vc not in self.vcs:
            raise ServiceError(404, f"VC {vc} does not exist; see GET vcs")
        try:
            table = parse_body(body)
        except LimitsError as exc:
            raise ServiceError(400, exc.message, exc.field) from None
        self.work.unit([], request=True, write=lambda batch, at: self.store.set_vc_limits(batch, vc, table.to_dict(), at, by))
        self.work.unit(self.work.facts_of(self.core.set_user_limits(vc, table, self.work.now())))
        self.work.publish([], cluster=True)
        return limits_document(vc, table, "store")

    def effective_limits(self, user: str, groups: Iterable[str], vcs: Iterable[str]) -> dict[str, dict[str, int]]:
        """VC -> the limits in effect for ``user`` there (only the keys that are set)."""
        return {vc: self.core.effective_limits(vc, user, tuple(groups)).to_dict() for vc in vcs}
