"""REST views of jobs, the cluster and the VCs, built from the store's rows and the core's views."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable

from .states import JobState

if TYPE_CHECKING:
    from ..service import HiveService


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def task_names(spec: dict[str, Any]) -> list[str]:
    return [f"{t['name']}-{i}" for t in spec["tasks"] for i in range(t["count"])]


PRIVATE_FIELDS = ("spec", "working_dir", "output_dir")


def job_object(svc: "HiveService", row: dict[str, Any], placement: list[dict[str, Any]], *, detail: bool,
               private: bool, live_reason: bool = True) -> dict[str, Any]:
    job_id = row["id"]
    reason = row["reason"]
    job = svc.active.get(job_id)
    if live_reason and row["state"] == JobState.QUEUED.value and job is not None and job.lc.intent is None:
        reason = svc.core_reason(job_id) or reason
    obj: dict[str, Any] = {
        "id": row["id"], "name": row["name"], "user": row["user"], "vc": row["vc"], "kind": row["kind"],
        "state": row["state"], "reason": reason, "priority": row["priority"],
        "opportunistic": bool(row["opportunistic"]), "gpus": row["gpus"], "gpu_type": row["gpu_type"],
        "tasks": task_names(row["spec"]),
        "submitted_at": iso(row["submitted_at"]), "started_at": iso(row["started_at"]),
        "finished_at": iso(row["finished_at"]), "exit_code": row["exit_code"], "retries": row["retries"],
        "max_retries": row["max_retries"],
        "placement": [{"task": p["task"], "node": p["node"], "address": svc.node_address(p["node"]),
                       "gpus": list(p["gpus"]), "gpu_uuids": p["gpu_uuids"]} for p in placement],
    }
    if private:
        obj["spec"] = row["spec"]
        obj["working_dir"] = row["working_dir"]
        obj["output_dir"] = row["output_dir"]
    progress = svc.read_progress(job_id, row) if detail else svc.progress.view(
        job_id, row["spec"].get("job_type"), row["gpus"])
    if progress is not None:  # hive_lab.progress lines and known figures (docs/checkpoint.md)
        obj["progress"] = progress
    if detail:
        obj["history"] = [{"state": h["state"], "at": iso(h["at"]), "reason": h["reason"]}
                          for h in svc.store.history(job_id)]
    return obj


def cluster_object(svc: "HiveService") -> dict[str, Any]:
    view = svc.scheduler.cluster_view()
    cells = view.get("cells", [])
    users = {j.id: j.user for j in svc.active.values()}
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
                "user": users.get(job_id) if job_id else None, "opportunistic": bool(cell.get("opportunistic")),
                "utilization": None, "memory_used_mb": None, "bad": cell.get("state") == "bad",
                "drained": node in svc.drained_nodes or (node, index) in svc.drained_gpus,
                "path": list(path),
            })
            if svc.hardware is not None:  # live readings and the health rules' verdict
                gpus[-1].update(svc.hardware.gpu_status(node, index))
            return
        for child in children:
            walk(child, path + [cell.get("address")])

    for top in cells:
        walk(top, [])
    nodes = []
    for name, info in svc.scheduler_nodes().items():
        nodes.append({"name": name, "cpus": getattr(info, "cpus", None), "memory_mb": getattr(info, "memory_mb", None),
                      "gpu_count": getattr(info, "gpu_count", None), "gpu_types": list(getattr(info, "gpu_types", ()) or ()),
                      "drained": name in svc.drained_nodes})
    return {"gpus_total": svc.scheduler.gpu_count(), "gpus_free": svc.scheduler.free_gpu_count(),
            "nodes": nodes, "cells": cells, "gpus": gpus}


def vcs_object(svc: "HiveService", may_submit: Callable[[str], bool]) -> dict[str, Any]:
    out = []
    for name, v in sorted(svc.scheduler.vc_view().items()):
        item = {"name": name}
        item.update({k: v.get(k) for k in ("guaranteed_gpus", "used_gpus", "opportunistic_gpus", "doomed_gpus",
                                           "queue_length", "running_jobs", "guaranteed_cells")})
        item["mine"] = may_submit(name)
        out.append(item)
    return {"vcs": out}
