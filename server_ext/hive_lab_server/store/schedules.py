"""Stored recurring jobs (``schedules``, ``schedule_runs``; migration 0007): the few queries
pipelines/schedules.py needs, each its own transaction on the store's engine."""

from __future__ import annotations

from typing import Any, Iterable

from sqlalchemy import delete, func, insert, select, update

from hive_lab_server.store.models import Schedule, ScheduleRun

_schedules = Schedule.__table__
_runs = ScheduleRun.__table__


class ScheduleStore:
    def __init__(self, store: Any):
        self.engine = store.engine

    def max_seq(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(_schedules.c.seq))).scalar() or 0)

    def insert(self, row: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(_schedules), [row])

    def get(self, schedule_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(_schedules).where(_schedules.c.id == schedule_id)).mappings().first()
            return dict(row) if row else None

    def named(self, user: str, name: str) -> dict[str, Any] | None:
        """The user's oldest schedule of this name (names are unique per owner since issue 40; older
        stores may hold several: the oldest is the one a new one of that name replaces)."""
        stmt = (select(_schedules).where(_schedules.c.user == user, _schedules.c.name == name)
                .order_by(_schedules.c.seq).limit(1))
        with self.engine.connect() as conn:
            row = conn.execute(stmt).mappings().first()
            return dict(row) if row else None

    def list(self, users: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Oldest first; ``users`` None: everyone's."""
        stmt = select(_schedules).order_by(_schedules.c.seq)
        if users is not None:
            stmt = stmt.where(_schedules.c.user.in_(list(users)))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(stmt).mappings()]

    def update(self, schedule_id: str, **fields: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(_schedules).where(_schedules.c.id == schedule_id).values(**fields))

    def delete(self, schedule_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(_runs).where(_runs.c.schedule_id == schedule_id))
            conn.execute(delete(_schedules).where(_schedules.c.id == schedule_id))

    def advance(self, schedule_id: str, next_run_at: float, runs: list[dict[str, Any]]) -> list[int]:
        """Record the due times handled (``runs``) and the next one, together; returns the runs' ids."""
        ids = []
        with self.engine.begin() as conn:
            for run in runs:
                ids.append(conn.execute(insert(_runs).values(schedule_id=schedule_id, **run)).inserted_primary_key[0])
            conn.execute(update(_schedules).where(_schedules.c.id == schedule_id).values(next_run_at=next_run_at))
        return ids

    def set_run(self, run_id: int, **fields: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(_runs).where(_runs.c.id == run_id).values(**fields))

    def runs(self, schedule_ids: Iterable[str], last: int) -> dict[str, list[dict[str, Any]]]:
        """Each schedule's ``last`` runs, newest first."""
        ids = list(schedule_ids)
        out: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        if not ids:
            return out
        stmt = select(_runs).where(_runs.c.schedule_id.in_(ids)).order_by(_runs.c.id.desc())
        with self.engine.connect() as conn:
            for r in conn.execute(stmt).mappings():
                if len(out[r["schedule_id"]]) < last:
                    out[r["schedule_id"]].append(dict(r))
        return out
