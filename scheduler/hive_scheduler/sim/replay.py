"""Replay a cluster's own history: the live configuration (checked against what was observed), what-if
changes side by side, and capacity questions answered by replaying.

- ``replay_history(history, cluster, live=LivePolicy(...), changes=[...], policies=[...])`` -> ``Report``:
  scenario ``live`` first (the live cluster and policy), then every change under every policy.
- The live check: a job's replayed wait matches its observed one when they differ by at most
  ``max(TOLERANCE_S, TOLERANCE_FRACTION x observed)``; the check holds when at least ``PASS_FRACTION``
  of the jobs match. Why not exact: live, a job starts within a poll of the service after its GPUs free
  up and holds them while its container starts and stops; hardware faults, drains and reconfigurations
  are not in the history; jobs carried over from before the window are left out of the check.
- ``capacity_search(history, cluster, vc, within_s=300, fraction=0.9)``: the fewest GPUs ``vc`` needs for
  ``fraction`` of its jobs to start within ``within_s``, by replaying the history at several sizes
  (doubling up from the live size, then bisecting; waits shrink as a VC grows, so the search trusts that).

A replay decides as the live server does: an overflowed job that ends early frees its VC's cells at
once (the simulator's ``private_timing`` ghosts, which keep each VC on its private cluster's timing, are
off here; :mod:`hive_scheduler.overflow`).

Policies: ``hived`` (the core with the live order inside each VC), ``hived:<order>`` or a bare core order
other than ``fifo`` (``fair_share``, ``drf``, ``priority``) for the core with that order, and the
baselines ``quota``, ``fifo`` (one global queue) and ``private``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..policies import ORDERS
from .cluster_changes import ChangeError, apply_changes, describe_changes
from .engine import POLICIES, SimResult, simulate
from .history import History
from .metrics import percentile

__all__ = ["LivePolicy", "Scenario", "LiveCheck", "Report", "CapacityAnswer", "replay_history", "capacity_search",
           "resolve_policy", "order_label", "average_seconds", "TOLERANCE_S", "TOLERANCE_FRACTION", "PASS_FRACTION", "readable_seconds"]

TOLERANCE_S = 60.0
TOLERANCE_FRACTION = 0.10
PASS_FRACTION = 0.90


@dataclass(frozen=True)
class LivePolicy:
    """How the live scheduler decides (``GET history`` reports it): the order inside each VC, the overflow
    lever, and the queueing discipline (skip / strict / backfill)."""

    order: str = "fifo"
    overflow: bool = True
    queueing: str = "skip"


# how a scenario's label names the order inside each VC (the core's order names are for config files)
ORDER_WORDS = {"fifo": "first come, first served", "priority": "by priority", "drf": "dominant resource fairness",
               "fair_share": "fair share"}


def order_label(order: str) -> str:
    """``fair_share`` -> ``fair share in each VC``."""
    return f"{ORDER_WORDS.get(order, order)} in each VC"


def resolve_policy(name: str, live: LivePolicy) -> tuple[str, str, str]:
    """(simulator policy, order inside VCs, label) for a policy name of this module's vocabulary."""
    name = name.strip()
    if name == "hived":
        return "hived", live.order, order_label(live.order)
    if name.startswith("hived:"):
        order = name.split(":", 1)[1]
    elif name in POLICIES:
        return name, live.order, name
    else:
        order = name
    if order not in ORDERS:
        raise ValueError(f"unknown policy {name!r}; use hived, hived:<order>, an order ({', '.join(sorted(ORDERS))}) "
                         f"or a baseline ({', '.join(p for p in POLICIES if p != 'hived')})")
    return "hived", order, order_label(order)


def average_seconds(s: float) -> str:
    """An average wait: ``0 s``, ``0.4 s``, ``12 s``, ``3 min`` (never "at once": an average is a figure)."""
    if s == math.inf:
        return "never"
    if s < 10:
        return f"{s:.1f} s".replace(".0 s", " s")
    return readable_seconds(s)


def readable_seconds(s: float) -> str:
    if s == math.inf:
        return "never"
    if s < 1:
        return "at once" if s <= 0 else "under a second"
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


@dataclass
class Scenario:
    label: str
    policy: str
    order: str
    overflow: bool
    cluster: dict[str, Any]
    changes: list[str]
    result: SimResult
    history: History = field(repr=False)
    _waits: dict[str, float] | None = field(default=None, repr=False)

    @property
    def waits(self) -> dict[str, float]:
        """Each job's wait; ``inf`` for a job the policy rejected (it never starts)."""
        if self._waits is None:
            self._waits = waits_of(self.result)
        return self._waits

    def vc_waits(self, vc: str | None = None) -> list[float]:
        return [self.waits.get(s.job, 0.0) for s in self.history.submits if vc is None or s.vc == vc]

    def started_within(self, seconds: float, vc: str | None = None) -> float:
        """The fraction of jobs (of ``vc``) whose wait was at most ``seconds`` (1.0 with no jobs)."""
        waits = self.vc_waits(vc)
        return sum(1 for w in waits if w <= seconds) / len(waits) if waits else 1.0

    def summary(self, within_s: float = 300.0) -> dict[str, Any]:
        """Per VC and per user: jobs, average and p90 wait, and the share started within ``within_s``."""
        def row(waits: list[float]) -> dict[str, Any]:
            ran = [w for w in waits if w != math.inf]
            return {"jobs": len(waits), "avg_wait_s": sum(ran) / len(ran) if ran else 0.0,
                    "rejected": len(waits) - len(ran),
                    "p90_wait_s": percentile(waits, 90),
                    "within": sum(1 for w in waits if w <= within_s) / len(waits) if waits else 1.0}

        per_vc: dict[str, list[float]] = {}
        per_user: dict[str, list[float]] = {}
        for s in self.history.submits:
            w = self.waits.get(s.job, 0.0)
            per_vc.setdefault(s.vc, []).append(w)
            per_user.setdefault(s.user, []).append(w)
        m = self.result.metrics
        return {"label": self.label, "policy": self.policy, "order": self.order, "overflow": self.overflow,
                "changes": self.changes, "all": row(self.vc_waits()), "within_s": within_s,
                "by_vc": {vc: {**row(w), "guaranteed_gpus": _vc_gpus(self.cluster, vc),
                               "sharing_anomaly_s": (m.by_vc.get(vc) or {}).get("sharing_anomaly_s")}
                          for vc, w in sorted(per_vc.items())},
                "by_user": {u: row(w) for u, w in sorted(per_user.items())},
                "gpu_utilisation": m.gpu_utilisation, "preemptions": m.preemptions,
                "unfinished": m.unfinished, "rejected": m.rejected}


def waits_of(result: SimResult) -> dict[str, float]:
    """The replay's per-job waits, ``inf`` for rejected jobs (metrics count their wait as ended at once)."""
    waits = dict(result.metrics.waits)
    for d in result.decisions:
        if d["event"] == "rejected":
            waits[d["job"]] = math.inf
    return waits


def _vc_gpus(cluster: dict[str, Any], vc: str) -> int | None:
    from ..config import load_cluster_config

    try:
        return load_cluster_config(cluster).vc_gpus(vc)
    except Exception:  # noqa: BLE001 - an unknown VC has no guarantee to show
        return None


@dataclass
class LiveCheck:
    """The live configuration's replay against what was observed."""

    jobs: int
    matched: int
    tolerance_s: float
    tolerance_fraction: float
    pass_fraction: float
    observed_avg_s: float
    replayed_avg_s: float
    worst: list[tuple[str, float, float]]  # (job, observed, replayed): the largest differences

    @property
    def ok(self) -> bool:
        return self.jobs == 0 or self.matched / self.jobs >= self.pass_fraction

    def sentence(self) -> str:
        if not self.jobs:
            return "no jobs to compare with what was observed"
        share = self.matched / self.jobs
        verdict = "matches" if self.ok else "does NOT match"
        return (f"the replay of the live configuration {verdict} what was observed: {share:.0%} of {self.jobs} jobs "
                f"waited as long as they did live, within max({self.tolerance_s:.0f} s, "
                f"{self.tolerance_fraction:.0%}) (needed: {self.pass_fraction:.0%}); average wait "
                f"{average_seconds(self.replayed_avg_s)} replayed, {average_seconds(self.observed_avg_s)} observed")


def live_check(history: History, scenario: Scenario, tolerance_s: float = TOLERANCE_S,
               tolerance_fraction: float = TOLERANCE_FRACTION, pass_fraction: float = PASS_FRACTION) -> LiveCheck:
    diffs = []
    matched = 0
    for job, observed in sorted(history.observed.items()):
        replayed = scenario.waits.get(job, 0.0)
        if abs(replayed - observed) <= max(tolerance_s, tolerance_fraction * observed):
            matched += 1
        diffs.append((abs(replayed - observed), job, observed, replayed))
    diffs.sort(key=lambda d: (-d[0], d[1]))
    n = len(history.observed)
    return LiveCheck(jobs=n, matched=matched, tolerance_s=tolerance_s, tolerance_fraction=tolerance_fraction,
                     pass_fraction=pass_fraction,
                     observed_avg_s=sum(history.observed.values()) / n if n else 0.0,
                     replayed_avg_s=sum(scenario.waits.get(j, 0.0) for j in history.observed) / n if n else 0.0,
                     worst=[(j, o, r) for _, j, o, r in diffs[:5]])


@dataclass
class Report:
    scenarios: list[Scenario]
    check: LiveCheck
    history: History = field(repr=False)
    notes: list[str] = field(default_factory=list)  # what could not be replayed, and why

    @property
    def live(self) -> Scenario:
        return self.scenarios[0]

    def effect(self, scenario: Scenario, vc: str | None = None, quantile: float = 90.0) -> str:
        """The change's effect in one sentence: "with cv-101 at 12 GPUs (was 8): 90 % of cv-101's jobs start
        within 2 min instead of 61 %" (the live share of jobs that started within the same time)."""
        vc = vc or self.focus_vc(scenario)
        waits = scenario.vc_waits(vc)
        if not waits:
            return f"{scenario.label}: {vc} had no jobs"
        if scenario.waits == self.live.waits:
            return (f"{scenario.label}: no change, every job waits as long as under the live configuration "
                    f"({self.history_text()})")
        ranked = sorted(waits)  # the wait within which ``quantile`` % of the jobs did start (no interpolation)
        t = ranked[max(0, math.ceil(quantile / 100 * len(ranked)) - 1)]
        live_share = self.live.started_within(t, vc)
        when = "at once" if t <= 0 else f"within {readable_seconds(t)}"
        if 100 * live_share >= quantile:  # no better than live: say so instead of "instead of 100 %"
            return (f"{scenario.label}: {quantile:.0f} % of {vc}'s jobs start {when}, no sooner than under the "
                    f"live configuration ({100 * live_share:.0f} % did)")
        return (f"{scenario.label}: {quantile:.0f} % of {vc}'s jobs start {when} instead of {100 * live_share:.0f} % "
                f"under the live configuration")

    def history_text(self) -> str:
        """What the replay rests on: ``12 jobs over 1 h of history``, and a word when that is short."""
        submits = self.history.submits
        if not submits:
            return "no jobs in the history"
        span = max(e.t for e in self.history.events) - min(e.t for e in self.history.events)
        jobs = f"{len(submits)} job{'s' if len(submits) != 1 else ''}"
        text = f"{jobs} over {readable_seconds(span)} of history" if span > 0 else f"{jobs}, all submitted at once"
        if span < 86400:
            text += "; a short history: what-ifs say more with a week of it"
        return text

    def focus_vc(self, scenario: Scenario) -> str:
        """The VC a change is about (the first one it resizes), else the VC that waited most live."""
        for text in scenario.changes:
            vc = text.split(" at ", 1)[0]
            if " at " in text and any(s.vc == vc for s in self.history.submits):
                return vc
        per_vc = self.live.summary()["by_vc"]
        return max(sorted(per_vc), key=lambda v: per_vc[v]["avg_wait_s"]) if per_vc else ""

    def table(self, within_s: float = 300.0) -> list[dict[str, Any]]:
        """One row per scenario and VC: guaranteed GPUs, average and p90 wait, share started within ``within_s``."""
        rows = []
        for sc in self.scenarios:
            for vc, r in sc.summary(within_s)["by_vc"].items():
                rows.append({"scenario": sc.label, "vc": vc, "guaranteed_gpus": r["guaranteed_gpus"],
                             "jobs": r["jobs"], "avg_wait_s": r["avg_wait_s"], "p90_wait_s": r["p90_wait_s"],
                             f"started_within_{within_s:g}s": r["within"]})
        return rows


def _run(history: History, cluster: Any, policy: str, order: str, overflow: bool, queueing: str,
         anomaly: bool, notes: list[str] | None = None) -> SimResult:
    queueing = queueing if policy == "hived" else "skip"
    if anomaly:
        try:
            return simulate(cluster, history.events, policy, order=order, overflow=overflow, queueing=queueing,
                            anomaly=True, private_timing=False)
        except ValueError as exc:  # (ConfigError) the private reference cannot be built for this model
            if notes is not None and not any(n.startswith("no sharing anomaly") for n in notes):
                notes.append(f"no sharing anomaly: the VCs alone cannot be modelled ({exc})")
    return simulate(cluster, history.events, policy, order=order, overflow=overflow, queueing=queueing,
                    anomaly=False, private_timing=False)


def replay_history(history: History, cluster: Any, *, live: LivePolicy = LivePolicy(),
                   changes: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
                   policies: Sequence[str] | None = None, anomaly: bool = False) -> Report:
    """The live scenario, then each of ``changes`` (one dict or a list; none: the live cluster) under each
    of ``policies`` (default ``["hived"]``). ``anomaly``: also replay ``private`` for the sharing anomaly."""
    from ..config import load_cluster_config

    live_cluster = load_cluster_config(cluster).to_dict()
    change_list: list[Mapping[str, Any]]
    if changes is None:
        change_list = []
    elif isinstance(changes, Mapping):
        change_list = [changes]
    else:
        change_list = list(changes)
    resolved = [resolve_policy(p, live) for p in (policies or ["hived"])]
    notes: list[str] = []
    base = _run(history, live_cluster, "hived", live.order, live.overflow, live.queueing, anomaly, notes)
    scenarios = [Scenario("live", "hived", live.order, live.overflow, live_cluster, [], base, history)]
    for change in change_list or [{}]:
        model, said = apply_changes(live_cluster, change)
        overflow = bool(change.get("overflow", live.overflow))
        for policy, order, label in resolved:
            order = change.get("order", order)
            if not said and policy == "hived" and order == live.order and overflow == live.overflow:
                continue  # the live scenario itself
            result = _run(history, model, policy, order, overflow, live.queueing, anomaly, notes)
            text = describe_changes(said) if said else "the live cluster"
            if policy != "hived" or order != live.order:
                text += f", {label}"
            scenarios.append(Scenario(f"with {text}", policy, order, overflow, model, said, result, history))
    return Report(scenarios=scenarios, check=live_check(history, scenarios[0]), history=history, notes=notes)


@dataclass
class CapacityAnswer:
    vc: str
    within_s: float
    fraction: float
    gpus: int | None  # None: not reached within the search's bound
    live_gpus: int
    tried: dict[int, float]  # GPUs -> share of the VC's jobs that started within ``within_s``

    def sentence(self) -> str:
        live = self.tried.get(self.live_gpus)
        now = f" (with its {self.live_gpus} GPUs: {100 * live:.0f} %)" if live is not None else ""
        if self.gpus is None:
            return (f"{self.vc}: no size up to {max(self.tried)} GPUs gets {self.fraction:.0%} of its jobs started "
                    f"within {readable_seconds(self.within_s)}{now}")
        return (f"{self.vc} needs {self.gpus} GPUs for {self.fraction:.0%} of its jobs to start within "
                f"{readable_seconds(self.within_s)}{now}")


def capacity_search(history: History, cluster: Any, vc: str, *, within_s: float = 300.0, fraction: float = 0.9,
                    live: LivePolicy = LivePolicy(), policy: str = "hived",
                    between: tuple[float, float] | None = None, max_gpus: int = 4096) -> CapacityAnswer:
    """The fewest GPUs ``vc`` needs so that ``fraction`` of its jobs (submitted in ``between``, seconds of the
    history, when given: e.g. deadline week) start within ``within_s`` seconds, by replay."""
    from ..config import load_cluster_config

    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if within_s < 0:
        raise ValueError(f"within must be >= 0 seconds, got {within_s}")
    cfg = load_cluster_config(cluster)
    if vc not in cfg.virtual_clusters:
        raise ChangeError(f"unknown VC {vc!r}; VCs: {', '.join(sorted(cfg.virtual_clusters))}")
    sim_policy, order, _ = resolve_policy(policy, live)
    jobs = [s.job for s in history.submits if s.vc == vc and (between is None or between[0] <= s.t < between[1])]
    tried: dict[int, float] = {}

    def share(gpus: int) -> float:
        if gpus not in tried:
            model, _ = apply_changes(cfg, {"vcs": {vc: gpus}})
            waits = waits_of(_run(history, model, sim_policy, order, live.overflow, live.queueing, False))
            tried[gpus] = sum(1 for j in jobs if waits.get(j, 0.0) <= within_s) / len(jobs) if jobs else 1.0
        return tried[gpus]

    live_gpus = cfg.vc_gpus(vc)
    need = max(1, max((math.ceil(s.gpus) for s in history.submits if s.vc == vc), default=1))
    lo, hi = need - 1, max(live_gpus, need)
    while share(hi) < fraction:  # double until enough
        lo = hi
        if hi >= max_gpus:
            return CapacityAnswer(vc, within_s, fraction, None, live_gpus, dict(sorted(tried.items())))
        hi = min(max_gpus, hi * 2)
    while hi - lo > 1:  # the fewest in (lo, hi]
        mid = (lo + hi) // 2
        if share(mid) >= fraction:
            hi = mid
        else:
            lo = mid
    return CapacityAnswer(vc, within_s, fraction, hi, live_gpus, dict(sorted(tried.items())))
