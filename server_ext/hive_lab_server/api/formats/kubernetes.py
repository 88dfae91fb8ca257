"""Kubernetes GPU workloads as hive-lab jobs: a ``batch/v1`` Job, a ``v1`` Pod, a Volcano
``batch.volcano.sh/v1alpha1`` Job.

``resources.limits["nvidia.com/gpu"]`` is the GPU count; HAMi's ``nvidia.com/gpucores`` (percent of one
GPU) and ``nvidia.com/gpumem`` (MB) ask for a share of one GPU. A Job's ``parallelism`` is its task
count; a Volcano Job's tasks are task groups placed as one gang (``minAvailable``), its ``queue`` the
VC. Image and command are taken as given; what a cluster here has no notion of (volumes, node
selectors, service accounts, ...) is reported as not applied.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from hive_lab_server.wire.spec import GPU_SHARES
from hive_lab_server.api.formats.common import (NO_IMAGE_HINT, Translation, env_value, fail, image_not_applied, job_name,
                                                task_name, vc_from, want_dict, want_int, want_list)

POD_FIELDS_APPLIED = {"containers", "restartPolicy"}


def quantity_cpus(value: Any, field: str) -> float:
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m?)", text)
    if not m:
        raise fail(field, f"give CPUs as 2, 0.5 or 500m (got {text!r:.30})")
    return float(m.group(1)) / (1000 if m.group(2) else 1)


def quantity_mb(value: Any, field: str) -> int:
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T|e\d+)?", text)
    if not m:
        raise fail(field, f"give memory as 512Mi, 16Gi or a number of bytes (got {text!r:.30})")
    scale = {None: 1 / 2**20, "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 2**20, "k": 1e3 / 2**20, "K": 1e3 / 2**20,
             "M": 1e6 / 2**20, "G": 1e9 / 2**20, "T": 1e12 / 2**20}
    suffix = m.group(2)
    factor = 10 ** int(suffix[1:]) / 2**20 if suffix and suffix.startswith("e") else scale[suffix]
    return math.ceil(float(m.group(1)) * factor)


def _gpus(res: dict, field: str, notes: list[str]) -> tuple[Any, int | None]:
    """(gpus, gpu_memory_mb) from a container's limits (else requests)."""
    limits = want_dict(res.get("limits") or {}, f"{field}.limits")
    requests = want_dict(res.get("requests") or {}, f"{field}.requests")
    src, where = (limits, "limits") if "nvidia.com/gpu" in limits else (requests, "requests")
    count = src.get("nvidia.com/gpu", 0)
    count = want_int(count, f"{field}.{where}[nvidia.com/gpu]", 0)
    cores = limits.get("nvidia.com/gpucores", requests.get("nvidia.com/gpucores"))
    mem = limits.get("nvidia.com/gpumem", requests.get("nvidia.com/gpumem"))
    for other in sorted(set(limits) | set(requests)):
        if other.startswith(("nvidia.com/", "amd.com/")) and other not in ("nvidia.com/gpu", "nvidia.com/gpucores",
                                                                           "nvidia.com/gpumem"):
            raise fail(f"{field}.limits[{other}]", "not a resource hive-lab schedules (nvidia.com/gpu, and HAMi's "
                                                   "nvidia.com/gpucores and nvidia.com/gpumem are)")
    if cores is None and mem is None:
        return count, None
    if count != 1:
        raise fail(f"{field}.limits[nvidia.com/gpucores]", "a share (gpucores/gpumem) is a share of one GPU; ask "
                                                          "for nvidia.com/gpu: 1 with it")
    gpu_mem = want_int(mem, f"{field}.limits[nvidia.com/gpumem]", 1) if mem is not None else None
    if cores is None:
        notes.append(f"{field}.limits[nvidia.com/gpumem]: without gpucores, a 1/8 share with a {gpu_mem} MB "
                     "memory budget")
        return 0.125, gpu_mem
    pct = want_int(cores, f"{field}.limits[nvidia.com/gpucores]", 1)
    if pct >= 100:
        return 1, None if gpu_mem is None else notes.append(
            f"{field}.limits[nvidia.com/gpumem]: a whole GPU's memory is all its own; not applied") or None
    share = min((s for s in GPU_SHARES if s * 100 >= pct), default=GPU_SHARES[0])
    if share * 100 != pct:
        notes.append(f"{field}.limits[nvidia.com/gpucores]: {pct}% runs as a {share:g} share (shares here are "
                     "1/2, 1/4 and 1/8 of a GPU)")
    return share, gpu_mem


def pod_task(pod: dict, field: str, notes: list[str], ignore_image: bool = False) -> dict[str, Any]:
    """One task group (without name/count) from a pod spec: image, command, GPUs, CPUs, memory, env.
    ``ignore_image``: the image is not applied (noted; ``image`` None), the command runs as processes."""
    pod = want_dict(pod, field)
    containers = want_list(pod.get("containers"), f"{field}.containers") if pod.get("containers") is not None else []
    if len(containers) != 1:
        raise fail(f"{field}.containers", f"hive-lab runs one container per task; this pod has {len(containers)}")
    c = want_dict(containers[0], f"{field}.containers[0]")
    cf = f"{field}.containers[0]"
    if not c.get("image") and not ignore_image:
        raise fail(f"{cf}.image", f"give the image the task runs in, {NO_IMAGE_HINT}")
    if ignore_image:
        notes.append(image_not_applied(f"{cf}.image", [str(c["image"])] if c.get("image") else []))
    command = [str(x) for x in want_list(c.get("command") or [], f"{cf}.command")]
    args = [str(x) for x in want_list(c.get("args") or [], f"{cf}.args")]
    if not command:
        raise fail(f"{cf}.command", "give the command (hive-lab does not read the image's entrypoint); args alone "
                                    "are not enough")
    res = want_dict(c.get("resources") or {}, f"{cf}.resources")
    gpus, gpu_mem = _gpus(res, f"{cf}.resources", notes)
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    cpu_q = requests.get("cpu", limits.get("cpu"))
    mem_q = requests.get("memory", limits.get("memory"))
    env: dict[str, str] = {}
    for i, e in enumerate(want_list(c.get("env") or [], f"{cf}.env")):
        e = want_dict(e, f"{cf}.env[{i}]")
        if "valueFrom" in e:
            notes.append(f"{cf}.env[{i}]: {e.get('name')} valueFrom is not applied (no Kubernetes API here)")
            continue
        env[str(e.get("name"))] = env_value(e.get("value"))
    for key in sorted(set(c) - {"name", "image", "command", "args", "resources", "env", "imagePullPolicy"}):
        notes.append(f"{cf}.{key}: not applied")
    for key in sorted(set(pod) - {"containers", "restartPolicy", "schedulerName"}):
        notes.append(f"{field}.{key}: not applied")
    task = {"gpus": gpus, "cpus": quantity_cpus(cpu_q, f"{cf}.resources.requests.cpu") if cpu_q is not None else 1,
            "memory_mb": quantity_mb(mem_q, f"{cf}.resources.requests.memory") if mem_q is not None else 1024,
            "command": shlex.join(command + args)}
    if gpu_mem is not None:
        task["gpu_memory_mb"] = gpu_mem
    return {"task": task, "image": None if ignore_image else str(c["image"]), "env": env}


def _name(meta: dict) -> str:
    return job_name(meta.get("name") or (meta.get("generateName") or "k8s-job").rstrip("-"))


def _meta_notes(meta: dict, notes: list[str]) -> None:
    for key in sorted(set(meta) - {"name", "generateName", "labels", "annotations"}):
        notes.append(f"metadata.{key}: not applied")


def translate(doc: dict, *, ignore_image: bool = False) -> Translation:
    """``ignore_image``: the containers' images are not applied (noted); the commands run as processes."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    meta = want_dict(doc.get("metadata") or {}, "metadata")
    notes: list[str] = []
    _meta_notes(meta, notes)
    spec = want_dict(doc.get("spec") or {}, "spec")
    if kind == "Pod" and api == "v1":
        one = pod_task(spec, "spec", notes, ignore_image)
        policy = spec.get("restartPolicy", "Always")
        if policy == "Always":
            notes.append("spec.restartPolicy: Always is not applied; the pod runs as a batch job, once")
        request = {"name": _name(meta), "image": one["image"], "env": one["env"],
                   "tasks": [{"name": "pod", "count": 1, **one["task"]}],
                   "max_retries": 0}
        return Translation("kubernetes", request, doc, notes, runtime={"platform": "kubernetes"})
    if kind == "Job" and api == "batch/v1":
        template = want_dict(spec.get("template") or {}, "spec.template")
        one = pod_task(template.get("spec") or {}, "spec.template.spec", notes, ignore_image)
        parallelism = want_int(spec.get("parallelism", 1), "spec.parallelism", 1)
        completions = spec.get("completions")
        if completions is not None and want_int(completions, "spec.completions", 1) != parallelism:
            notes.append(f"spec.completions: {completions} not applied; {parallelism} pods (parallelism) run once each")
        for key in sorted(set(spec) - {"template", "parallelism", "completions", "backoffLimit",
                                       "activeDeadlineSeconds", "completionMode"}):
            notes.append(f"spec.{key}: not applied")
        request: dict[str, Any] = {"name": _name(meta), "image": one["image"], "env": one["env"],
                                   "tasks": [{"name": "pod", "count": parallelism, **one["task"]}],
                                   "max_retries": min(100, want_int(spec.get("backoffLimit", 6), "spec.backoffLimit", 0))}
        if spec.get("activeDeadlineSeconds") is not None:
            request["time_limit_s"] = want_int(spec["activeDeadlineSeconds"], "spec.activeDeadlineSeconds", 1)
        return Translation("kubernetes", request, doc, notes, runtime={"platform": "kubernetes"})
    if kind == "Job" and str(api).startswith("batch.volcano.sh/"):
        tasks, images, env = [], {}, {}
        for i, t in enumerate(want_list(spec.get("tasks"), "spec.tasks") if spec.get("tasks") is not None else []):
            field = f"spec.tasks[{i}]"
            t = want_dict(t, field)
            tname = task_name(str(t.get("name") or f"task{i}"), f"{field}.name")
            template = want_dict(t.get("template") or {}, f"{field}.template")
            one = pod_task(template.get("spec") or {}, f"{field}.template.spec", notes, ignore_image)
            images[tname] = one["image"]
            for k, v in one["env"].items():
                if env.get(k, v) != v:
                    raise fail(f"{field}.template.spec.containers[0].env", f"{k} differs between tasks; hive-lab "
                                                                           "gives a job's tasks one environment")
                env[k] = v
            for key in sorted(set(t) - {"name", "replicas", "template", "policies"}):
                notes.append(f"{field}.{key}: not applied")
            count = want_int(t.get("replicas", 1), f"{field}.replicas", 1)
            policy, others = {}, []
            for j, rule in enumerate(want_list(t.get("policies") or [], f"{field}.policies")):
                rule = want_dict(rule, f"{field}.policies[{j}]")
                if (rule.get("event"), rule.get("action")) == ("TaskCompleted", "CompleteJob"):
                    policy["min_succeeded"] = count  # this task's replicas all succeeded: the job is complete
                else:
                    others.append(f"{rule.get('event') or rule.get('exitCode')} -> {rule.get('action')}")
            if others:
                notes.append(f"{field}.policies: {', '.join(others)} not applied; a failed task fails the job")
            tasks.append({"name": tname, "count": count, **one["task"], **policy})
        if not tasks:
            raise fail("spec.tasks", "give at least one task")
        if len(set(images.values())) > 1 and not ignore_image:
            other = [n for n in images if images[n] != images[tasks[0]["name"]]][0]
            raise fail(f"spec.tasks[{[t['name'] for t in tasks].index(other)}].template.spec.containers[0].image",
                       "hive-lab runs a job's tasks in one image")
        total = sum(t["count"] for t in tasks)
        min_available = spec.get("minAvailable")
        if min_available is not None and want_int(min_available, "spec.minAvailable", 1) < total:
            notes.append(f"spec.minAvailable: {min_available} < {total}; hive-lab starts all {total} tasks together")
        for key, why in (("plugins", "VC_*/VK_* task variables are given; ssh and svc files are not made"),
                         ("policies", "a failed task fails the job"), ("schedulerName", "hive-lab schedules it"),
                         ("priorityClassName", "priorities come from the VC")):
            if key in spec:
                notes.append(f"spec.{key}: not applied ({why})")
        for key in sorted(set(spec) - {"tasks", "minAvailable", "queue", "maxRetry", "plugins", "policies",
                                       "schedulerName", "priorityClassName"}):
            notes.append(f"spec.{key}: not applied")
        request = {"name": _name(meta), "image": images[tasks[0]["name"]], "env": env, "tasks": tasks,
                   "max_retries": min(100, want_int(spec.get("maxRetry", 3), "spec.maxRetry", 0))}
        vc = vc_from(spec.get("queue"), "spec.queue", notes)
        if vc:
            request["vc"] = vc
        return Translation("volcano", request, doc, notes, runtime={"platform": "volcano"})
    raise fail("kind", f"hive-lab runs a batch/v1 Job, a v1 Pod or a batch.volcano.sh Job (got {api}/{kind})")
