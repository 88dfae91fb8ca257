"""``hive_lab.replay``: "what if" for the whole cluster, from its own history, in a notebook (admins).

    import hive_lab
    r = hive_lab.replay(since="7d", changes={"vcs": {"cv-101": 12}}, policies=["hived", "fair_share"])
    r                       # the charts and sentences (a widget in JupyterLab)
    r.check.sentence()      # does the replay of the live configuration match what was observed?
    r.effects               # each change's effect in one sentence
    r.table()               # per scenario and VC: GPUs, jobs, average / p90 wait, share started within 5 min
    r.capacity("cv-101", within="5m", target=0.9)   # the fewest GPUs for 90 % to start within 5 minutes

The history comes from ``GET history`` (owners pseudonymised unless ``real_names=True``); the replays run
here, in the notebook's kernel (``hive_scheduler.sim.replay``), under the live cluster and policy the
server reports.
"""

from __future__ import annotations

import io
from typing import Any, Mapping, Sequence

__all__ = ["replay", "Replay"]


class Replay:
    """A history replayed: the report (scenarios, live check), sentences, tables, charts, capacity answers."""

    def __init__(self, report: Any, history: Any, cluster: dict, live: Any, within_s: float, since: str,
                 until: str | None = None, since_epoch: float | None = None):
        self.report = report
        self.history = history
        self.cluster = cluster
        self.live = live
        self.within_s = within_s
        self.since = since
        self.until = until
        self.since_epoch = since_epoch  # the window's start (UNIX seconds): hours of the day in the charts

    @property
    def check(self) -> Any:
        return self.report.check

    @property
    def scenarios(self) -> list:
        return self.report.scenarios

    @property
    def effects(self) -> list[str]:
        return [self.report.effect(sc) for sc in self.report.scenarios[1:]]

    def table(self) -> Any:
        """Rows per scenario and VC (a pandas DataFrame when pandas is installed, else a list of dicts)."""
        rows = self.report.table(self.within_s)
        try:
            import pandas as pd
        except ImportError:
            return rows
        return pd.DataFrame(rows)

    def capacity(self, vc: str, within: Any = "5m", target: float = 0.9, policy: str = "hived",
                 between: tuple[float, float] | None = None) -> Any:
        """The fewest GPUs ``vc`` needs so that ``target`` of its jobs (submitted in ``between``, seconds
        from the window's start, e.g. the deadline days) start within ``within``, found by replaying."""
        from hive_scheduler.sim.replay import capacity_search

        from .durations import parse_duration

        return capacity_search(self.history, self.cluster, vc, within_s=parse_duration(within, "within"),
                               fraction=target, live=self.live, policy=policy, between=between)

    def charts(self) -> Any:
        """The bokeh charts (queueing per VC and user, GPUs used vs guaranteed, anomaly, busiest hour)."""
        from .widgets.replay import replay_charts

        return replay_charts(self)

    def widget(self) -> Any:
        from .widgets.replay import ReplayView

        return ReplayView(self)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget())

    def __repr__(self) -> str:
        lines = [f"replay since {self.since}: {self.report.history_text()}", self.check.sentence(), *self.effects]
        return "\n".join(lines)


def replay(since: str = "7d", changes: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
           policies: Sequence[str] | None = None, *, within: Any = "5m", real_names: bool = False,
           anomaly: bool = True, client: Any = None) -> Replay:
    """Replay the cluster's jobs since ``since`` (``7d``, ``24h``, an ISO date) under the live configuration
    and under each of ``changes`` (``{"vcs": {"cv-101": 12}}``, ``{"nodes": 2}``, ``{"overflow": False}``; a
    list for several) with each of ``policies`` (``hived`` = the live order, ``fair_share``, ``drf``,
    ``quota``, ``fifo``, ``private``). ``within``: the wait that counts as "started in time" (default 5 min).
    ``anomaly``: also replay each VC alone (``private``) for the sharing anomaly (one more replay)."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history
    from hive_scheduler.sim.replay import LivePolicy, replay_history

    from .durations import parse_duration

    if client is None:
        from .client import Client

        client = Client()
    within_s = parse_duration(within, "within")
    doc = client.history(since=since, real_names=real_names)
    config = load_cluster_config(doc["cluster"])
    buf = io.StringIO()
    write_history(doc["jobs"], buf)
    history = parse_history(io.StringIO(buf.getvalue()), config, source=f"GET history?since={since}")
    policy = doc.get("policy") or {}
    live = LivePolicy(order=policy.get("order", "fifo"), overflow=bool(policy.get("overflow", True)),
                      queueing=policy.get("queueing", "skip"))
    report = replay_history(history, config, live=live, changes=changes, policies=policies, anomaly=anomaly)
    return Replay(report, history, config.to_dict(), live, within_s, since, doc.get("until"), _epoch(doc.get("since")))


def _epoch(iso: str | None) -> float | None:
    import datetime as dt

    if not iso:
        return None
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
