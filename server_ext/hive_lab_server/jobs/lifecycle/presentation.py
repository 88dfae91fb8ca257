"""REST views of jobs, the cluster and the VCs, built from the store's rows and the core's views."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from hive_scheduler.estimates import NO_LIMIT

from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import JobState

if TYPE_CHECKING:
    from hive_scheduler import ClusterConfig
    from hive_scheduler.protocol import LiveSchedulerCore

    from hive_lab_server.execution.launchers.base import Launcher
    from hive_lab_server.hardware.monitor import HardwareMonitor
    from hive_lab_server.jobs.lifecycle.hardware_events import HardwareEvents
    from hive_lab_server.jobs.start_estimates import StartEstimates
    from hive_lab_server.store import Store
    from hive_lab_server.timeshare.progress import ProgressTracker


class ServiceView(Protocol):
    """What the REST views read of the service (``HiveService`` is one)."""

    scheduler: LiveSchedulerCore
    store: Store
    active: Mapping[str, Any]
    hardware: HardwareMonitor | None
    progress: ProgressTracker
    start_estimates: StartEstimates
    gpu_uuids: Mapping[tuple[str, int], str]
    config: ClusterConfig  # its nodes
    launcher: Launcher  # where a node's tasks are reached
    hardware_events: HardwareEvents  # the drained nodes and GPUs

    def now(self) -> float: ...

    def read_progress(self, job_id: str, row: dict[str, Any] | None = None) -> dict[str, Any] | None: ...


def core_reason(core: Any, job_id: str) -> str | None:
    """Why the core keeps a queued job waiting now (None: it does not know the job)."""
    try:
        view = core.job(job_id)
    except Exception:
        return None
    return getattr(view, "reason", None) if view is not None else None


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def task_names(stored: Mapping[str, Any]) -> list[str]:
    """The task names of a stored row's spec (``row["spec"]``)."""
    return LaunchSpec.of(stored).task_names()


PRIVATE_FIELDS = ("spec", "working_dir", "output_dir")


def job_object(svc: ServiceView, row: dict[str, Any], placement: list[dict[str, Any]], *, detail: bool,
               private: bool, live_reason: bool = True) -> dict[str, Any]:
    job_id = row["id"]
    reason = row["reason"]
    spec = LaunchSpec.of(row["spec"])
    job = svc.active.get(job_id)
    if live_reason and row["state"] == JobState.QUEUED.value and job is not None and job.lc.intent is None:
        reason = core_reason(svc.scheduler, job_id) or reason
    obj: dict[str, Any] = {
        "id": row["id"], "name": row["name"], "user": row["user"], "vc": row["vc"], "kind": row["kind"],
        "state": row["state"], "reason": reason, "priority": row["priority"],
        "opportunistic": bool(row["opportunistic"]), "gpus": spec_gpus(spec, row["gpus"]),
        "gpu_type": row["gpu_type"], "tasks": spec.task_names(),
        "submitted_at": iso(row["submitted_at"]), "started_at": iso(row["started_at"]),
        "finished_at": iso(row["finished_at"]), "exit_code": row["exit_code"], "retries": row["retries"],
        "max_retries": row["max_retries"],
        "placement": [placement_object(svc, p) for p in placement],
    }
    obj.update(time_limit_fields(svc, row, spec.time_limit_s, job))
    if row.get("array_id") is not None:  # an element of a job array (arrays/)
        obj["array_id"] = row["array_id"]
        obj["array_index"] = row["array_index"]
    if private:
        obj["spec"] = row["spec"]
        obj["working_dir"] = row["working_dir"]
        obj["output_dir"] = row["output_dir"]
    obj.update(estimate_fields(svc, row, fresh=live_reason))
    progress = svc.read_progress(job_id, row) if detail else svc.progress.view(
        job_id, spec.job_type, row["gpus"])
    if progress is not None:  # hive_lab.progress lines and known figures (docs/checkpoint.md)
        obj["progress"] = progress
    if detail:
        obj["history"] = [{"seq": h["seq"], "state": h["state"], "at": iso(h["at"]), "reason": h["reason"]}
                          for h in svc.store.history(job_id)]
    return obj


def time_limit_fields(svc: ServiceView, row: dict[str, Any], limit: float | None, job: Any) -> dict[str, Any]:
    """``time_limit_s`` (``limit``: its spec's), and for a running attempt with a limit its ``deadline`` and
    ``time_left_s`` (derived like the machine's: the attempt's stored start + the limit)."""
    out: dict[str, Any] = {"time_limit_s": limit, "deadline": None, "time_left_s": None}
    if limit is not None and row["state"] == JobState.RUNNING.value and row.get("started_at") is not None:
        deadline = row["started_at"] + limit
        if job is not None and job.lc.deadline is not None:
            deadline = job.lc.deadline
        out["deadline"] = iso(deadline)
        out["time_left_s"] = round(max(0.0, deadline - svc.now()), 3)
    return out


def estimate_fields(svc: ServiceView, row: dict[str, Any], fresh: bool = True) -> dict[str, Any]:
    """``estimated_start`` (ISO or null) and its one-line basis for a queued job (see start_estimates)."""
    est = None
    if row["state"] == JobState.QUEUED.value and getattr(svc, "start_estimates", None) is not None:
        est = svc.start_estimates.get(row["id"], fresh=fresh)
    if est is None or (est.start is None and est.basis == NO_LIMIT):
        # nothing to go on (what it waits for has no limit, history or VC default): say nothing rather
        # than "start unknown" on every queued job
        return {"estimated_start": None, "estimated_start_basis": None}
    return {"estimated_start": iso(est.start) if est.start is not None else None, "estimated_start_basis": est.basis}


def placement_object(svc: ServiceView, p: dict[str, Any]) -> dict[str, Any]:
    """One task's placement; a share of one GPU adds its share, slot (first eighth) and MIG device."""
    out = {"task": p["task"], "node": p["node"], "address": svc.launcher.host_address(p["node"]), "gpus": list(p["gpus"]),
           "gpu_uuids": p["gpu_uuids"]}
    if p.get("share"):
        out.update(share=p["share"], share_slot=p.get("share_slot"), mig_device=p.get("mig_device"))
    return out


def spec_gpus(spec: LaunchSpec, gpus: int) -> int | float:
    """The job's GPUs: a share of one GPU (0.5, 0.25, 0.125) from its spec, else ``gpus``, the row's count."""
    share = spec.share
    return share if share is not None else gpus


def cluster_object(svc: ServiceView) -> dict[str, Any]:
    view = svc.scheduler.cluster_view()
    cells = view.get("cells", [])
    active = svc.active

    def user_of(job_id: str | None) -> str | None:  # (looked up per GPU: a dict of every unfinished job's
        job = active.get(job_id) if job_id else None  # user cost a GET cluster 3 ms at 10,000 of them)
        return job.user if job is not None else None

    gpus: list[dict[str, Any]] = []

    def walk(cell: dict[str, Any], path: list[str]) -> None:
        children = cell.get("children") or []
        if not children and cell.get("gpu") is not None or (not children and cell.get("level") == 1):
            node = cell.get("node")
            index = cell.get("gpu")
            jobs = cell.get("jobs") or []
            job_id = jobs[0] if jobs else None
            gpus.append({
                "node": node, "index": index, "uuid": svc.gpu_uuids.get((node, index)),
                "type": cell.get("type"), "state": cell.get("state"), "vc": cell.get("vc"), "job": job_id,
                "user": user_of(job_id), "opportunistic": bool(cell.get("opportunistic")),
                "utilization": None, "memory_used_mb": None, "bad": cell.get("state") == "bad",
                "drained": node in svc.hardware_events.drained_nodes or (node, index) in svc.hardware_events.drained_gpus,
                "path": list(path),
            })
            if cell.get("shares") is not None:  # a shared GPU: each share and who holds it
                util = getattr(svc.hardware, "job_share_utilization", None)
                gpus[-1]["shares"] = [dict(sh, user=user_of(sh["job"]),  # and its own processes' SM utilisation
                                           utilization=util(sh["job"]) if util is not None else None)
                                      for sh in cell["shares"]]
                gpus[-1]["free_share"] = cell.get("free_share")
            if svc.hardware is not None:  # live readings and the health rules' verdict
                gpus[-1].update(svc.hardware.gpu_status(node, index))
            return
        for child in children:
            walk(child, path + [cell.get("address")])

    for top in cells:
        walk(top, [])
    nodes = []
    for name, info in svc.config.nodes.items():
        nodes.append({"name": name, "cpus": getattr(info, "cpus", None), "memory_mb": getattr(info, "memory_mb", None),
                      "gpu_count": getattr(info, "gpu_count", None), "gpu_types": list(getattr(info, "gpu_types", ()) or ()),
                      "drained": name in svc.hardware_events.drained_nodes})
    return {"gpus_total": svc.scheduler.gpu_count(), "gpus_free": svc.scheduler.free_gpu_count(),
            "nodes": nodes, "cells": cells, "gpus": gpus}


def vcs_object(svc: ServiceView, may_submit: Callable[[str], bool]) -> dict[str, Any]:
    out = []
    for name, v in sorted(svc.scheduler.vc_view().items()):
        item = {"name": name}
        item.update({k: v.get(k) for k in ("guaranteed_gpus", "used_gpus", "opportunistic_gpus", "doomed_gpus",
                                           "queue_length", "running_jobs", "guaranteed_cells")})
        item["mine"] = may_submit(name)
        out.append(item)
    return {"vcs": out}
