"""One placed hive-lab job -> one Slurm job (a heterogeneous job when it spans nodes).

The core has already chosen the node and the GPU indices of every task; this module writes the Slurm
request that makes Slurm use exactly those:

* one component per node (``--nodelist=<node> --nodes=1``), components joined as a het job, so a
  multi-node gang starts as ONE Slurm job, all or nothing;
* GPUs by index: on nodes whose GRES has one type per GPU (``gpu:a100_g0:1,...``, see docs/slurm.md)
  the request names the exact devices (``--gres=gpu:a100_g2:1,gpu:a100_g3:1``); elsewhere it asks
  for the count (``--gres=gpu:2``) and relies on the check below;
* every task runs in a small bash wrapper that first checks where it landed (``SLURMD_NODENAME`` and
  ``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS``) against the placement; on a mismatch it does not run the
  command, writes ``mismatch <why>`` to its exit file and exits with ``MISMATCH_EXIT`` (the launcher
  reports the task lost with that reason, so the service requeues it; it never runs on the wrong GPUs);
* each task writes its exit code to an exit file beside its log (Slurm keeps no per-step exit codes
  without accounting), and appends its output to its ``log_path``.

A single task runs directly in the batch script; several tasks run as ``srun`` steps (``--overlap``,
each with its own ``--gres``), one per task, in the background, and the script waits for all.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from hive_scheduler.words import gpu_list_text
from hive_lab_server.execution.launchers.base import LaunchError, LaunchRequest, TaskLaunch

MISMATCH_EXIT = 219
NAME_PREFIX = "hive-lab:"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def exit_file(task: TaskLaunch | str, log_path: str | None = None) -> str:
    """Where the task's wrapper records its exit (``<log dir>/.slurm/<task>.exit``)."""
    name = task if isinstance(task, str) else task.task
    path = log_path if log_path is not None else task.log_path  # type: ignore[union-attr]
    return os.path.join(os.path.dirname(path), ".slurm", f"{name}.exit")


def job_name(job_id: str) -> str:
    return f"{NAME_PREFIX}{job_id}"


def job_comment(job_id: str, instance: str, tasks: list[str]) -> str:
    return f"{NAME_PREFIX}{job_id} instance={instance} tasks={','.join(tasks)}"


def parse_comment(comment: str) -> tuple[str, str, list[str]] | None:
    """``(job id, instance, task names)`` from a comment written by ``job_comment``, else None."""
    if not comment or not comment.startswith(NAME_PREFIX):
        return None
    parts = comment.split()
    job_id = parts[0][len(NAME_PREFIX):]
    fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    tasks = [t for t in fields.get("tasks", "").split(",") if t]
    return job_id, fields.get("instance", ""), tasks


@dataclass
class Component:
    """One het-job component: everything on one node."""

    node: str
    tasks: list[TaskLaunch]
    gres: str | None  # job-level request for this node
    task_gres: dict[str, str | None]  # task -> step request
    cpus_per_task: int
    memory_mb: int | None


@dataclass
class SlurmJobPlan:
    job_id: str
    name: str
    comment: str
    components: list[Component]
    script: str
    options: dict[str, Any] = field(default_factory=dict)  # partition, account, qos, time_limit, output

    # --- the CLI form ----------------------------------------------------------------------------

    def sbatch_lines(self) -> list[str]:
        lines = []
        for i, comp in enumerate(self.components):
            if i:
                lines.append("#SBATCH hetjob")
            opts = [
                f"--job-name={self.name}", f"--comment={self.comment}", f"--nodes=1", f"--nodelist={comp.node}",
                f"--ntasks={len(comp.tasks)}", f"--cpus-per-task={comp.cpus_per_task}", "--no-requeue",
                f"--output={self.options['output']}", "--open-mode=append", "--export=ALL",
                f"--chdir={self.options['chdir']}",
            ]
            if comp.memory_mb:
                opts.append(f"--mem={comp.memory_mb}M")
            if comp.gres:
                opts.append(f"--gres={comp.gres}")
            for key, flag in (("partition", "--partition"), ("account", "--account"), ("qos", "--qos"),
                              ("time_limit", "--time")):
                if self.options.get(key):
                    opts.append(f"{flag}={self.options[key]}")
            for extra in self.options.get("extra_args") or ():
                opts.append(extra)
            lines.extend(f"#SBATCH {shlex.quote(o)}" for o in opts)
        return lines

    def sbatch_script(self) -> str:
        head, body = self.script.split("\n", 1)
        return "\n".join([head, *self.sbatch_lines(), body])

    # --- the REST form (slurmrestd v0.0.38 job_properties) ------------------------------------------

    def rest_payload(self, environment: dict[str, str], all_nodes: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """v0.0.38 does not parse ``required_nodes`` (slurmrestd answers "Operation not permitted"), so
        a component is pinned by excluding every other node of the cluster (``all_nodes``)."""
        jobs = []
        for comp in self.components:
            others = sorted(set(all_nodes) - {comp.node})
            job: dict[str, Any] = {
                "name": self.name, "comment": self.comment, "nodes": 1,
                "tasks": len(comp.tasks), "cpus_per_task": comp.cpus_per_task, "requeue": False,
                "standard_output": self.options["output"], "standard_error": self.options["output"],
                "current_working_directory": self.options["chdir"], "environment": dict(environment),
                "open_mode": "append",
            }
            if others:
                job["exclude_nodes"] = ",".join(others)
            if comp.memory_mb:
                job["memory_per_node"] = comp.memory_mb
            if comp.gres:
                job["gres"] = comp.gres
            for key in ("partition", "account", "qos"):
                if self.options.get(key):
                    job[key] = self.options[key]
            if self.options.get("time_limit"):
                job["time_limit"] = int(self.options["time_limit"])
            jobs.append(job)
        if len(jobs) == 1:
            return {"job": jobs[0], "script": self.script}
        return {"jobs": jobs, "script": self.script}


def _gres_for(node: Any, indices: tuple[int, ...], gres_mode: str) -> str | None:
    """The GRES request for ``indices`` on ``node`` (a ``slurm.inventory.SlurmNode`` or None)."""
    if not indices:
        return None
    per_index = gres_mode == "per-index" or (gres_mode == "auto" and node is not None and node.per_index)
    if per_index:
        if node is None:
            raise LaunchError("the Slurm launcher cannot name GPUs by index on an unknown node")
        parts = []
        for i in indices:
            g = node.gpu(i)
            if g is None or not g.gres_type:
                raise LaunchError(f"Slurm node {node.name} has no GRES type for GPU {i} "
                                  f"(per-index GRES is gpu:<model>_g<index>:1, see docs/slurm.md)")
            parts.append(f"gpu:{g.gres_type}:1")
        return ",".join(parts)
    return f"gpu:{len(indices)}"


def _q(s: str) -> str:
    return shlex.quote(s)


def _task_function(fn: str, t: TaskLaunch, *, in_step: bool, base_env: dict[str, str]) -> str:
    want = ",".join(str(i) for i in sorted(t.gpu_indices))
    exitf = exit_file(t)
    gpu_var = "SLURM_STEP_GPUS" if in_step else "SLURM_JOB_GPUS"
    env = dict(base_env)
    env.update(t.env)
    env.pop("CUDA_VISIBLE_DEVICES", None)  # Slurm's own value is used (it is right under cgroup remapping too)
    env["HIVE_GPU_INDICES"] = want
    exports = "\n".join(f"  export {k}={_q(v)}" for k, v in sorted(env.items())
                        if k.isidentifier() and not k.startswith("BASH_FUNC"))
    gpu_check = ""
    if t.gpu_indices:
        gpu_check = f"""  got=$(printf '%s' "${{{gpu_var}:-}}" | /usr/bin/tr ',' '\\n' | /usr/bin/sort -n | /usr/bin/paste -sd, -)
  if [ "$got" != {_q(want)} ]; then
    hive_mismatch "Slurm gave {t.task} ${{SLURMD_NODENAME:-?}} GPU $got, hive-lab placed it on {gpu_list_text(t.node, t.gpu_indices)}"
  fi
  slurm_cvd=${{CUDA_VISIBLE_DEVICES:-}}
"""
    cvd = '  export CUDA_VISIBLE_DEVICES="$slurm_cvd"\n' if t.gpu_indices else "  export CUDA_VISIBLE_DEVICES=\n"
    return f"""{fn}() {{
  exec >>{_q(t.log_path)} 2>&1 </dev/null
  exitf={_q(exitf)}
  hive_mismatch() {{
    echo "hive-lab: $1; the task was not run"
    printf 'mismatch %s\\n' "$1" > "$exitf.tmp" && /bin/mv -f "$exitf.tmp" "$exitf"
    exit {MISMATCH_EXIT}
  }}
  [ "${{SLURMD_NODENAME:-}}" = {_q(t.node)} ] || hive_mismatch "Slurm ran {t.task} on ${{SLURMD_NODENAME:-?}}, hive-lab placed it on {t.node}"
{gpu_check}{exports}
{cvd}  cd {_q(t.working_dir)} || {{ echo "hive-lab: cannot enter {t.working_dir}"; printf '126\\n' > "$exitf"; exit 126; }}
  trap : TERM INT HUP USR1
  /bin/sh -c {_q("trap : USR1" + chr(10) + t.command)}
  code=$?
  printf '%s\\n' "$code" > "$exitf.tmp" && /bin/mv -f "$exitf.tmp" "$exitf"
  exit $code
}}
"""


def plan_job(
    request: LaunchRequest,
    nodes: dict[str, Any],
    *,
    instance: str,
    gres_mode: str = "auto",
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    time_limit: int | None = None,
    extra_args: tuple[str, ...] = (),
    base_env: dict[str, str] | None = None,
) -> SlurmJobPlan:
    """The Slurm job for ``request``. ``nodes``: node name -> ``SlurmNode`` (GRES types)."""
    if not request.tasks:
        raise LaunchError(f"job {request.job_id} has no tasks to launch")
    if gres_mode not in ("auto", "per-index", "count"):
        raise LaunchError(f"SlurmLauncher.gres_mode must be auto, per-index or count, got {gres_mode!r}")
    tasks = sorted(request.tasks, key=lambda t: t.rank)
    by_node: dict[str, list[TaskLaunch]] = {}
    for t in tasks:
        if nodes and t.node not in nodes:
            raise LaunchError(f"task {t.task} is placed on {t.node}, which Slurm does not know "
                              f"(Slurm nodes: {', '.join(sorted(nodes))})")
        by_node.setdefault(t.node, []).append(t)
    comps = []
    for node, ts in by_node.items():
        info = nodes.get(node)
        all_gpus = tuple(sorted(g for t in ts for g in t.gpu_indices))
        if len(set(all_gpus)) != len(all_gpus):
            raise LaunchError(f"two tasks of {request.job_id} are placed on the same GPU of {node}")
        mems = [t.memory_mb for t in ts]
        comps.append(Component(
            node=node, tasks=ts, gres=_gres_for(info, all_gpus, gres_mode),
            task_gres={t.task: _gres_for(info, tuple(sorted(t.gpu_indices)), gres_mode) for t in ts},
            cpus_per_task=max(1, max(math.ceil(t.cpus) for t in ts)),
            memory_mb=sum(mems) if all(m > 0 for m in mems) else None,
        ))
    env = {"PATH": DEFAULT_PATH}
    env.update(base_env or {})
    single = len(tasks) == 1
    funcs, launches = [], []
    for ci, comp in enumerate(comps):
        for t in comp.tasks:
            fn = f"hive_task_{t.rank}"
            funcs.append(_task_function(fn, t, in_step=not single, base_env=env))
            if single:
                launches.append(fn)
                continue
            step = ["srun"]
            if len(comps) > 1:
                step.append(f"--het-group={ci}")
            step += ["--nodes=1", "--ntasks=1", f"--cpus-per-task={comp.cpus_per_task}", "--overlap",
                     f"--gres={comp.task_gres[t.task] or 'none'}", f"--job-name={t.task}", "--export=ALL"]
            launches.append(f"export -f {fn}\n{' '.join(_q(s) for s in step)} /bin/bash -c {fn} &")
    first = tasks[0]
    script = "\n".join([
        "#!/bin/bash",
        f"# hive-lab job {request.job_id} of {request.user or '?'}: {len(tasks)} task(s) on {', '.join(by_node)}",
        f"export PATH={_q(env['PATH'])}",
        *funcs,
        *([] if single else ["trap : USR1  # the checkpoint signal is for the tasks; the batch shell waits on"]),
        *launches,
        *([] if single else ["until wait; do :; done"]),
        "",
    ])
    return SlurmJobPlan(
        job_id=request.job_id, name=job_name(request.job_id),
        comment=job_comment(request.job_id, instance, [t.task for t in tasks]), components=comps, script=script,
        options={"partition": partition, "account": account, "qos": qos, "time_limit": time_limit,
                 "extra_args": tuple(extra_args), "output": first.log_path, "chdir": first.working_dir},
    )
