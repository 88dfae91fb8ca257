"""The hive-lab store: jobs, their state history, placements and usage, in any SQLAlchemy database.

``Store(url)`` connects, runs the alembic migrations (``upgrade head``) and offers the few
queries the service and the REST handlers need. SQLite gets WAL mode, so readers never block
the writer; everything runs on the server's event loop thread.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from typing import Any, Callable, Iterable, Iterator

from alembic import command
from alembic.config import Config
from sqlalchemy import bindparam, create_engine, delete, event, func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from hive_lab_server.store.models import Base, Drain, Job, JobArray, JobEvent, JobUsage, Placement, VcLimits

__all__ = ["Store", "Batch", "Base", "Job", "JobArray", "JobEvent", "Placement", "Drain", "VcLimits", "JobUsage",
           "migrate", "migrations_head"]

MIGRATIONS = pathlib.Path(__file__).parent / "migrations"
TERMINAL_STATES = ("succeeded", "failed", "cancelled")
ACTIVE_STATES = ("submitted", "queued", "scheduled", "running")

_jobs = Job.__table__
_events = JobEvent.__table__
_placements = Placement.__table__
_drains = Drain.__table__
_vc_limits = VcLimits.__table__
_usage = JobUsage.__table__
_arrays = JobArray.__table__
JOB_COLUMNS = tuple(c.name for c in _jobs.columns)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` with the packaged alembic migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def migrations_head() -> str:
    """The newest revision of the packaged migrations (what ``migrate`` brings a store to)."""
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg).get_current_head()


class Batch:
    """Writes collected by ``Store.begin()``; ``flush`` sends them in dependency order."""

    def __init__(self) -> None:
        self.new_jobs: dict[str, dict[str, Any]] = {}
        self.updates: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.placements: dict[str, list[dict[str, Any]]] = {}
        self.drains: list[tuple[str, int | None, dict[str, Any] | None]] = []
        self.limits: dict[str, dict[str, Any]] = {}
        self.usage: list[tuple[str, dict[str, Any]]] = []  # ("open", row) | ("close", fields), in order
        self.new_arrays: list[dict[str, Any]] = []
        self.array_updates: dict[str, dict[str, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.new_jobs or self.updates or self.events or self.placements or self.drains or self.limits
                    or self.usage or self.new_arrays or self.array_updates)

    def flush(self, conn: Connection) -> None:
        if self.new_arrays:
            conn.execute(insert(_arrays), self.new_arrays)
        if self.new_jobs:  # one executemany: every row with the same columns (an array's columns or NULL)
            rows = list(self.new_jobs.values())
            if any("array_id" in r for r in rows):
                rows = [{"array_id": None, "array_index": None, **r} for r in rows]
            conn.execute(insert(_jobs), rows)
        for array_id, fields in self.array_updates.items():
            conn.execute(update(_arrays).where(_arrays.c.id == array_id).values(**fields))
        by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for job_id, fields in self.updates.items():
            by_columns.setdefault(tuple(sorted(fields)), []).append({"_id": job_id, **fields})
        for columns, rows in by_columns.items():
            stmt = update(_jobs).where(_jobs.c.id == bindparam("_id")).values({c: bindparam(c) for c in columns})
            conn.execute(stmt, rows)
        if self.placements:
            conn.execute(delete(_placements).where(_placements.c.job_id.in_(list(self.placements))))
            rows = [r for rs in self.placements.values() for r in rs]
            if rows:
                conn.execute(insert(_placements), rows)
        if self.events:  # each row learns its id: the event's sequence number (events websocket)
            ids = conn.execute(insert(_events).returning(_events.c.id, sort_by_parameter_order=True), self.events)
            for row, (seq,) in zip(self.events, ids):
                row["seq"] = seq
        for node, gpu, row in self.drains:
            cond = _drains.c.gpu.is_(None) if gpu is None else _drains.c.gpu == gpu
            conn.execute(delete(_drains).where(_drains.c.node == node, cond))
            if row is not None:
                conn.execute(insert(_drains), [row])
        if self.limits:
            conn.execute(delete(_vc_limits).where(_vc_limits.c.vc.in_(list(self.limits))))
            conn.execute(insert(_vc_limits), list(self.limits.values()))

        for op, row in self.usage:  # after the jobs they refer to; in the order they happened
            if op == "open":
                conn.execute(insert(_usage), [row])
            else:
                fields = {k: v for k, v in row.items() if k != "job_id"}
                conn.execute(update(_usage).where(_usage.c.job_id == row["job_id"], _usage.c.ended_at.is_(None))
                             .values(**fields))


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def _private_sqlite(path: str) -> None:
    """The store holds every job's env and staged files: owner-only (0600), from its creation on.
    SQLite creates its -wal and -shm files with the database file's mode."""
    for p in (path, f"{path}-wal", f"{path}-shm"):
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600) if p == path else \
                os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)


class Store:
    def __init__(self, url: str):
        self.url = url
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            path = url.split("///", 1)[-1] if "///" in url else ""
            if path and path != ":memory:":
                pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
                _private_sqlite(path)
            kwargs["connect_args"] = {"check_same_thread": False}
        else:  # a database server may restart under us: test pooled connections before use
            kwargs["pool_pre_ping"] = True
        self.engine = create_engine(url, **kwargs)
        # told the committed state changes (rows with their ``seq``), in order, right after each commit
        self.on_events: Callable[[list[dict[str, Any]]], None] | None = None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        migrate(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextlib.contextmanager
    def begin(self) -> Iterator["Batch"]:
        """A unit of work: the writes made through it are merged (one row per new job, one UPDATE per
        changed job, events and placements in bulk) and committed together in one transaction."""
        batch = Batch()
        yield batch
        if batch:
            with self.engine.begin() as conn:
                batch.flush(conn)
            if batch.events and self.on_events is not None:
                self.on_events(batch.events)

    # --- writes (all go through a Batch from begin()) --------------------------------------------

    def insert_job(self, batch: "Batch", row: dict[str, Any]) -> None:
        batch.new_jobs[row["id"]] = row  # later updates in the same batch land in this row

    def update_job(self, batch: "Batch", job_id: str, **fields: Any) -> None:
        row = batch.new_jobs.get(job_id)
        if row is not None:
            row.update(fields)
        else:
            batch.updates.setdefault(job_id, {}).update(fields)

    def add_event(self, batch: "Batch", job_id: str, state: str, at: float, reason: str) -> None:
        batch.events.append({"job_id": job_id, "state": state, "at": at, "reason": reason})

    def set_placement(self, batch: "Batch", job_id: str, attempt: int, rows: Iterable[dict[str, Any]]) -> None:
        batch.placements[job_id] = [dict(r, job_id=job_id, attempt=attempt) for r in rows]

    def clear_placement(self, batch: "Batch", job_id: str) -> None:
        batch.placements[job_id] = []

    def add_drain(self, batch: "Batch", node: str, gpu: int | None, at: float, by: str) -> None:
        batch.drains.append((node, gpu, {"node": node, "gpu": gpu, "at": at, "by": by}))

    def remove_drain(self, batch: "Batch", node: str, gpu: int | None) -> None:
        batch.drains.append((node, gpu, None))

    def set_vc_limits(self, batch: "Batch", vc: str, limits: dict[str, Any], at: float, by: str) -> None:
        batch.limits[vc] = {"vc": vc, "limits": limits, "at": at, "by": by}

    def open_usage(self, batch: "Batch", row: dict[str, Any]) -> None:
        """An attempt starts holding GPUs (``row``: a ``job_usage`` row without ``ended_at``)."""
        batch.usage.append(("open", dict(row)))

    def close_usage(self, batch: "Batch", job_id: str, at: float, cpu_seconds: float | None = None,
                    peak_memory_mb: float | None = None) -> None:
        """The job's open attempt (if any) gave its GPUs back at ``at``."""
        batch.usage.append(("close", {"job_id": job_id, "ended_at": at, "cpu_seconds": cpu_seconds,
                                      "peak_memory_mb": peak_memory_mb}))

    def insert_array(self, batch: "Batch", row: dict[str, Any]) -> None:
        batch.new_arrays.append(row)

    def update_array(self, batch: "Batch", array_id: str, **fields: Any) -> None:
        batch.array_updates.setdefault(array_id, {}).update(fields)

    # --- reads ---------------------------------------------------------------------------------

    def max_array_seq(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(_arrays.c.seq))).scalar() or 0)

    def get_array(self, array_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(_arrays).where(_arrays.c.id == array_id)).mappings().first()
            return dict(row) if row else None

    def list_arrays(self, *, users: list[str] | None = None, limit: int = 50, offset: int = 0,
                    after: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Arrays, newest first (``users``: only theirs); ``after``: only those older than the array with
        that ``seq`` (a cursor: pages stay put while arrays arrive)."""
        conds = [_arrays.c.user.in_(users)] if users else []
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(_arrays).where(*conds)).scalar() or 0
            if after is not None:
                conds.append(_arrays.c.seq < after)
            rows = conn.execute(select(_arrays).where(*conds).order_by(_arrays.c.seq.desc())
                                .limit(limit).offset(offset)).mappings()
            return [dict(r) for r in rows], int(total)

    def array_states(self, array_ids: list[str]) -> dict[str, dict[str, int]]:
        """Array -> state -> how many of its released elements are in it (one GROUP BY)."""
        out: dict[str, dict[str, int]] = {a: {} for a in array_ids}
        if not array_ids:
            return out
        with self.engine.connect() as conn:
            rows = conn.execute(select(_jobs.c.array_id, _jobs.c.state, func.count())
                                .where(_jobs.c.array_id.in_(array_ids))
                                .group_by(_jobs.c.array_id, _jobs.c.state))
            for array_id, state, n in rows:
                out[array_id][state] = int(n)
        return out

    def array_elements(self, array_id: str, indices: list[int] | None = None) -> list[dict[str, Any]]:
        """The released elements' rows (``indices``: only these), by index."""
        conds = [_jobs.c.array_id == array_id]
        if indices is not None:
            conds.append(_jobs.c.array_index.in_(indices))
        with self.engine.connect() as conn:
            rows = conn.execute(select(_jobs).where(*conds).order_by(_jobs.c.array_index)).mappings()
            return [dict(r) for r in rows]

    def unfinished_arrays(self) -> list[dict[str, Any]]:
        """Arrays with an index neither released nor cancelled, or an element not ended (the feeder's
        work after a restart), oldest first. Released elements come with their id, index and state."""
        with self.engine.connect() as conn:
            arrays = [dict(r) for r in conn.execute(select(_arrays).order_by(_arrays.c.seq)).mappings()]
            out = []
            for a in arrays:
                rows = conn.execute(select(_jobs.c.id, _jobs.c.array_index, _jobs.c.state)
                                    .where(_jobs.c.array_id == a["id"])).all()
                released = {int(i): (job_id, state) for job_id, i, state in rows}
                if len(released) + len(set(a["cancelled"]) - set(released)) >= len(a["indices"]) and \
                        all(state in TERMINAL_STATES for _, state in released.values()):
                    continue
                a["released"] = released
                out.append(a)
            return out

    def max_seq(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(_jobs.c.seq))).scalar() or 0)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(_jobs).where(_jobs.c.id == job_id)).mappings().first()
            return dict(row) if row else None

    def last_event_seq(self) -> int:
        """The sequence number of the newest stored state change (0: none yet)."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(_events.c.id))).scalar() or 0)

    def events_after(self, seq: int, limit: int) -> list[dict[str, Any]]:
        """At most ``limit`` stored state changes after sequence number ``seq``, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(_events.c.id.label("seq"), _events.c.job_id, _events.c.state, _events.c.at, _events.c.reason)
                .where(_events.c.id > seq).order_by(_events.c.id).limit(limit)
            ).mappings()
            return [dict(r) for r in rows]

    def history(self, job_id: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(_events.c.id.label("seq"), _events.c.state, _events.c.at, _events.c.reason)
                .where(_events.c.job_id == job_id)
                .order_by(_events.c.id)
            ).mappings()
            return [dict(r) for r in rows]

    def placements(self, job_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        ids = list(job_ids)
        out: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        if not ids:
            return out
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                rows = conn.execute(
                    select(_placements)
                    .where(_placements.c.job_id.in_(ids[start : start + 500]))
                    .order_by(_placements.c.job_id, _placements.c.rank)
                ).mappings()
                for r in rows:
                    out[r["job_id"]].append(dict(r))
        return out

    def list_jobs(
        self,
        *,
        users: list[str] | None = None,
        vcs: list[str] | None = None,
        states: list[str] | None = None,
        limit: int = 50,
        offset: int = 0,
        elements: bool = True,
        after: int | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of jobs, newest first; ``elements=False`` leaves out the elements of job arrays; ``after``:
        only jobs older than the one with that ``seq`` (a cursor: pages stay put while jobs arrive). ``total``
        counts every match, the cursor aside."""
        conds = [] if elements else [_jobs.c.array_id.is_(None)]
        if users:
            conds.append(_jobs.c.user.in_(users))
        if vcs:
            conds.append(_jobs.c.vc.in_(vcs))
        if states:
            conds.append(_jobs.c.state.in_(states))
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(_jobs).where(*conds)).scalar() or 0
            if after is not None:
                conds.append(_jobs.c.seq < after)
            rows = conn.execute(
                select(_jobs).where(*conds).order_by(_jobs.c.seq.desc()).limit(limit).offset(offset)
            ).mappings()
            return [dict(r) for r in rows], int(total)

    def runs(self, state: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The newest ``limit`` jobs in ``state`` (``id``, ``user``, ``started_at``, ``finished_at``; newest
        first, as ``list_jobs``) and how many jobs are in it: ``list_jobs`` without the specs, whose decoding
        was most of the cost of the start estimates' history (issue 40; ``specs`` reads those not seen yet)."""
        cond = _jobs.c.state == state
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(_jobs).where(cond)).scalar() or 0
            rows = conn.execute(
                select(_jobs.c.id, _jobs.c.user, _jobs.c.started_at, _jobs.c.finished_at)
                .where(cond).order_by(_jobs.c.seq.desc()).limit(limit)
            ).mappings()
            return [dict(r) for r in rows], int(total)

    def specs(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """``{job id: spec}`` of the jobs among ``ids`` that exist."""
        out: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                rows = conn.execute(select(_jobs.c.id, _jobs.c.spec).where(_jobs.c.id.in_(ids[start : start + 500])))
                out.update((job_id, spec) for job_id, spec in rows)
        return out

    def jobs_in_window(self, since: float) -> list[dict[str, Any]]:
        """Jobs submitted at or after ``since``, or not finished by then (still queued or running at
        ``since``), oldest first (the history export)."""
        cond = (_jobs.c.submitted_at >= since) | _jobs.c.finished_at.is_(None) | (_jobs.c.finished_at > since)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(_jobs).where(cond).order_by(_jobs.c.seq)).mappings()]

    def active_jobs(self) -> list[dict[str, Any]]:
        """Jobs not yet finished, oldest first (the order queued jobs go back into the core)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(_jobs).where(_jobs.c.state.in_(ACTIVE_STATES)).order_by(_jobs.c.seq)
            ).mappings()
            return [dict(r) for r in rows]

    def state_counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(_jobs.c.state, func.count()).group_by(_jobs.c.state))
            return {state: int(n) for state, n in rows}

    def drains(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(_drains).order_by(_drains.c.id)).mappings()]

    def vc_limits(self) -> dict[str, dict[str, Any]]:
        """VC -> the limits an admin stored for it (``{"default", "groups", "users"}``)."""
        with self.engine.connect() as conn:
            return {r["vc"]: r["limits"] for r in conn.execute(select(_vc_limits).order_by(_vc_limits.c.vc)).mappings()}

    def usage_rows(self, *, since: float | None = None, users: list[str] | None = None,
                   vcs: list[str] | None = None) -> list[dict[str, Any]]:
        """``job_usage`` rows of attempts still open or ended after ``since``, oldest first; ``users`` /
        ``vcs``: only theirs (None: everyone's, every VC's)."""
        conds = []
        if since is not None:
            conds.append((_usage.c.ended_at.is_(None)) | (_usage.c.ended_at > since))
        if users is not None:
            conds.append(_usage.c.user.in_(users))
        if vcs is not None:
            conds.append(_usage.c.vc.in_(vcs))
        with self.engine.connect() as conn:
            rows = conn.execute(select(_usage).where(*conds).order_by(_usage.c.id)).mappings()
            return [dict(r) for r in rows]

    def gpu_seconds_by_user(self, now: float) -> dict[str, float]:
        """All-time GPU-seconds per user (open attempts up to ``now``), summed in the database."""
        held = _usage.c.gpus * _usage.c.share
        ended = func.coalesce(_usage.c.ended_at, now)
        with self.engine.connect() as conn:
            rows = conn.execute(select(_usage.c.user, func.sum(held * (ended - _usage.c.started_at)))
                                .group_by(_usage.c.user).order_by(_usage.c.user))
            return {user: max(0.0, float(total or 0.0)) for user, total in rows}
