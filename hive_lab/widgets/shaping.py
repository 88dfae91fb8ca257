"""Pure data shaping for the views: REST JSON in, rows/columns/colours out (no widgets, no bokeh).

Kept apart so the views' content is unit-testable with recorded JSON.
"""

from __future__ import annotations

import zlib
from datetime import datetime

from ..format import (FINISHED, LENT_GPUS, age_text, gpu_name, gpus_text, placement_text, priority_text, seconds_between, short_estimate,
                      time_limit_text)
from .layout import Layout, compute_layout

# -- GPU states and colours -------------------------------------------------------------------------

STATE_COLORS = {
    "free": "#e6e6e6",
    "used": "#2ca02c",
    "reserved": "#ff9f1c",
    "opportunistic": "#9467bd",
    "bad": "#d62728",
    "drained": "#7f7f7f",
}
# categorical palette (Tableau 20 order, as bokeh's Category20) for VCs and jobs
CATEGORY20 = [
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
    "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
    "#bcbd22", "#dbdb8d", "#17becf", "#9edae5",
]
# red (bad) and greys (free/drained) are left out so a VC or job never looks like a GPU state
DISTINCT = [c for c in CATEGORY20[0::2] + CATEGORY20[1::2]
            if c not in ("#d62728", "#ff9896", "#7f7f7f", "#c7c7c7")]
COLOR_MODES = ("state", "vc", "job", "user")  # the same modes as the Lab heatmap


def gpu_state(gpu: dict) -> str:
    """One of free, used, reserved, opportunistic, bad, drained."""
    raw = gpu.get("state") or "free"
    if gpu.get("bad") or raw == "bad":
        return "bad"
    if raw == "used":
        return "opportunistic" if gpu.get("opportunistic") else "used"
    if raw == "reserved":
        return "reserved"
    if gpu.get("drained"):
        return "drained"
    return "free"


def vc_colors(names) -> dict[str, str]:
    """Stable colour per VC: sorted names take the palette in turn (distinct for up to 16 VCs)."""
    return {name: DISTINCT[i % len(DISTINCT)] for i, name in enumerate(sorted(set(names)))}


def job_color(job_id: str) -> str:
    """Stable colour per job (crc32 of its id), so colours do not move when jobs come and go."""
    return DISTINCT[zlib.crc32(job_id.encode()) % len(DISTINCT)]


user_color = job_color  # stable per user name the same way


def gpu_colors(gpus: list[dict], by: str = "state", vcs: list[str] | None = None) -> tuple[list[str], list[float]]:
    """Fill colour and alpha per GPU. ``by``: ``state`` | ``vc`` | ``job`` | ``user``.

    By VC: the VC's colour, full when used by that VC, pale when only bound/reserved for it; bad
    GPUs stay red in every mode; unassigned ones are grey."""
    if by not in COLOR_MODES:
        raise ValueError(f"colour by must be one of {', '.join(COLOR_MODES)}, got {by!r}")
    palette = vc_colors(list(vcs or []) + [g["vc"] for g in gpus if g.get("vc")]) if by == "vc" else {}
    colors, alphas = [], []
    for g in gpus:
        state = gpu_state(g)
        if state == "bad" or (by == "state"):
            colors.append(STATE_COLORS[state])
            alphas.append(1.0)
        elif by == "vc":
            if g.get("vc"):
                colors.append(palette[g["vc"]])
                alphas.append(1.0 if state in ("used", "opportunistic") else 0.35)
            else:
                colors.append(STATE_COLORS["drained" if state == "drained" else "free"])
                alphas.append(1.0)
        else:  # job or user: whose work holds the GPU
            owner = g.get(by)
            if owner:
                colors.append(job_color(owner) if by == "job" else user_color(owner))
                alphas.append(1.0)
            else:
                colors.append(STATE_COLORS["reserved" if state == "reserved" else
                                          "drained" if state == "drained" else "free"])
                alphas.append(1.0)
    return colors, alphas


def topology_key(cluster: dict) -> tuple:
    """What the layout depends on: the GPUs and their cell paths (not their states)."""
    return tuple((g.get("node"), g.get("index"), tuple(g.get("path") or ())) for g in cluster.get("gpus") or [])


def heatmap_columns(cluster: dict, by: str = "state", vcs: list[str] | None = None,
                    layout: Layout | None = None) -> dict[str, list]:
    """``GET cluster`` -> the ColumnDataSource columns of the heatmap (one row per GPU). Pass the
    ``layout`` from an earlier call with the same ``topology_key`` to skip recomputing it."""
    gpus = cluster.get("gpus") or []
    if layout is None:
        layout = compute_layout(gpus)
    colors, alphas = gpu_colors(gpus, by, vcs)
    return {
        "x": [x + 0.5 for x in layout.x],          # rect glyphs are centred
        "y": [y + 0.5 for y in layout.y],
        "color": colors,
        "alpha": alphas,
        "state": [gpu_state(g) for g in gpus],
        "node": [str(g.get("node", "")) for g in gpus],
        "index": [g.get("index", i) for i, g in enumerate(gpus)],
        "type": [g.get("type") or "" for g in gpus],
        "vc": [g.get("vc") or "" for g in gpus],
        "job": [g.get("job") or "" for g in gpus],
        "user": [g.get("user") or "" for g in gpus],
        "path": ["/".join(map(str, g.get("path") or [])) for g in gpus],
        "util": ["" if g.get("utilization") is None else f"{g['utilization']}%" for g in gpus],
    }


def share_columns(cluster: dict, layout: Layout | None = None) -> dict[str, list]:
    """A shared GPU drawn as its shares: one strip per share inside its GPU's cell (eighths left to
    right, as the core's ``share_slot`` says), coloured by the job holding it."""
    gpus = cluster.get("gpus") or []
    if layout is None:
        layout = compute_layout(gpus)
    cols: dict[str, list] = {k: [] for k in ("x", "y", "w", "color", "job", "user", "share", "gpu", "util")}
    for i, g in enumerate(gpus):
        for s in g.get("shares") or []:
            # the GPU's rect is 0.9 wide, centred in its unit cell
            left = layout.x[i] + 0.05 + 0.9 * s["slot"] / 8
            width = 0.9 * s["share"]
            cols["x"].append(left + width / 2)
            cols["y"].append(layout.y[i] + 0.5)
            cols["w"].append(max(0.01, width - 0.02))
            cols["color"].append(job_color(s["job"]))
            cols["job"].append(s["job"])
            cols["user"].append(s.get("user") or "")
            cols["share"].append(f"{s['share']:g} GPU")
            cols["gpu"].append(gpu_name(g.get("node", ""), g.get("index", i)))
            util = s.get("utilization")  # its own processes' SM utilisation (NVML per-process)
            cols["util"].append("" if util is None else f"{util:g}%")
    return cols


def heatmap_legend(columns: dict[str, list], by: str) -> list[tuple[str, str]]:
    """(label, colour) pairs for what is on screen, in a stable order."""
    seen: dict[str, str] = {}
    key = {"state": "state", "vc": "vc", "job": "job", "user": "user"}[by]
    for label, color, state in zip(columns[key], columns["color"], columns["state"]):
        if state == "bad" and by != "state":
            label = "bad"
        label = label or ("free" if state != "reserved" else "reserved")
        seen.setdefault(label, color)
    if by == "state":
        return [(s, STATE_COLORS[s]) for s in STATE_COLORS if s in seen]
    return sorted(seen.items())


# -- jobs -> table rows -----------------------------------------------------------------------------

STATE_ORDER = {"running": 0, "scheduled": 1, "queued": 2, "submitted": 3, "failed": 4, "cancelled": 5,
               "succeeded": 6}
COLUMNS = ("id", "name", "state", "reason", "gpus", "vc", "user", "priority", "age")


def job_rows(jobs: list[dict], me: str | None = None, admin: bool = False,
             now: datetime | None = None) -> list[dict]:
    """Jobs -> table rows: display strings plus sort keys and whether the viewer may cancel."""
    rows = []
    for job in jobs:
        state = job.get("state", "?")
        age_s = seconds_between(job.get("submitted_at"), None, now)
        where = placement_text(job.get("placement"))
        gpus = job.get("gpus", 0)
        shown = gpus_text(gpus, job.get("gpu_type"))  # one voice with the panel: "1 GPU", "2 A100 GPUs"
        rows.append({
            "id": job.get("id", ""),
            "name": job.get("name") or "",
            "state": state,
            # where a running job runs (its GPUs), else why it waits: the panel's and the cell view's words
            "reason": f"on {where}" if state == "running" and where else job.get("reason") or "",
            "gpus": shown,
            "gpus_n": gpus or 0,
            "vc": job.get("vc", ""),
            "user": job.get("user", ""),
            "priority": priority_text(job),
            "priority_n": -1 if job.get("opportunistic") else job.get("priority", 0),
            "age": age_text(age_s),
            "limit": time_limit_text(job),
            "estimate": short_estimate(job, now),
            "estimate_basis": job.get("estimated_start_basis") or "",
            "age_s": age_s or 0.0,
            "state_n": STATE_ORDER.get(state, 9),
            "mine": me is not None and job.get("user") == me,
            "cancellable": state not in FINISHED and (admin or (me is not None and job.get("user") == me)),
        })
    return rows


SORT_KEYS = {"gpus": "gpus_n", "priority": "priority_n", "age": "age_s", "state": "state_n"}


def sort_rows(rows: list[dict], column: str = "state", descending: bool = False) -> list[dict]:
    """Sort by a displayed column (numeric where the column is), ties by age (newest first) then id."""
    if column not in COLUMNS:
        raise ValueError(f"cannot sort by {column!r}; columns: {', '.join(COLUMNS)}")
    key = SORT_KEYS.get(column, column)
    ordered = sorted(rows, key=lambda r: (r["age_s"], r["id"]))
    return sorted(ordered, key=lambda r: r[key], reverse=descending)


def merge_job(jobs: list[dict], job: dict) -> list[dict]:
    """Apply a ``{"type": "job"}`` event to a job list: replace by id or put it first."""
    out = [j for j in jobs if j.get("id") != job.get("id")]
    for i, j in enumerate(jobs):
        if j.get("id") == job.get("id"):
            merged = dict(j)
            merged.update(job)
            out.insert(i, merged)
            return out
    return [job] + out


# -- VCs -> usage rows ------------------------------------------------------------------------------

def vc_rows(vcs: list[dict]) -> list[dict]:
    """Per VC: guaranteed vs used vs opportunistic GPUs, as numbers and bar percentages (of the VC's own
    scale: max(guaranteed, used + borrowed))."""
    rows = []
    for vc in vcs:
        g = int(vc.get("guaranteed_gpus", 0))
        used = int(vc.get("used_gpus", 0))
        lent = int(vc.get("opportunistic_gpus", 0))  # GPUs of other VCs running its opportunistic work
        doomed = int(vc.get("doomed_gpus", 0))
        scale = max(g, used + lent, 1)
        rows.append({
            "name": vc.get("name", ""),
            "guaranteed": g,
            "used": used,
            "borrowed": lent,
            "doomed": doomed,
            "free": max(g - used - doomed, 0),
            "queue": int(vc.get("queue_length", 0)),
            "running": int(vc.get("running_jobs", 0)),
            "mine": bool(vc.get("mine", False)),
            "used_pct": 100.0 * min(used, g) / scale,
            "over_pct": 100.0 * max(used - g, 0) / scale,
            "borrowed_pct": 100.0 * lent / scale,
            "doomed_pct": 100.0 * doomed / scale,
            "guaranteed_pct": 100.0 * g / scale,
            "summary": (f"{used}/{g} guaranteed GPUs used"
                        + (f", {lent} {LENT_GPUS}" if lent else "")
                        + (f", {doomed} bad" if doomed else "")
                        + f"; {vc.get('running_jobs', 0)} running, {vc.get('queue_length', 0)} queued"),
        })
    return rows
