"""A Slurm batch script (``#SBATCH`` directives) as a hive-lab job.

The job gets one task per node (``-N``), each with that node's GPUs, CPUs and memory; every task runs
the script with the ``SLURM_*`` variables a script reads (``execution.runtime_env`` adds the per-node
ones at launch). ``srun`` inside the script is hive-lab's: it starts this node's share of the step's
tasks (``--ntasks-per-node``), each with its ``SLURM_PROCID``/``SLURM_LOCALID``. As in Slurm, the
directives end at the first line that is not a comment.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from hive_lab_server.wire.spec import SpecError
from hive_lab_server.api.formats.common import Translation, fail, job_name, vc_from

SCRIPT = "slurm_script.sh"
SRUN = ".hive-slurm/srun"
RUN = ".hive-slurm/run.sh"
# staged files are not executable: srun is a bash function the script and its children inherit
RUN_SH = ('srun() { bash "$HIVE_WORKING_DIR/' + SRUN + '" "$@"; }\nexport -f srun\n'
          'exec bash "$HIVE_WORKING_DIR/' + SCRIPT + '"\n')

# option -> (canonical name, takes a value)
OPTIONS = {
    "-N": "nodes", "--nodes": "nodes", "-n": "ntasks", "--ntasks": "ntasks", "--ntasks-per-node": "ntasks-per-node",
    "--gres": "gres", "-G": "gpus", "--gpus": "gpus", "--gpus-per-node": "gpus-per-node",
    "--gpus-per-task": "gpus-per-task", "-c": "cpus-per-task", "--cpus-per-task": "cpus-per-task",
    "--mem": "mem", "--mem-per-cpu": "mem-per-cpu", "--mem-per-gpu": "mem-per-gpu", "-t": "time", "--time": "time",
    "-J": "job-name", "--job-name": "job-name", "-o": "output", "--output": "output", "-e": "error",
    "--error": "error", "-p": "partition", "--partition": "partition", "-a": "array", "--array": "array",
    "-d": "dependency", "--dependency": "dependency", "-A": "account", "--account": "account", "--qos": "qos",
    "-q": "qos", "--mail-type": "mail-type", "--mail-user": "mail-user", "-C": "constraint",
    "--constraint": "constraint", "--exclusive": "exclusive", "-D": "chdir", "--chdir": "chdir",
    "--export": "export", "--gpu-bind": "gpu-bind", "--cpu-bind": "cpu-bind", "--hint": "hint",
    "--signal": "signal", "--requeue": "requeue", "--no-requeue": "no-requeue", "--open-mode": "open-mode",
    "--comment": "comment", "--reservation": "reservation", "--nodelist": "nodelist", "-w": "nodelist",
    "--exclude": "exclude", "-x": "exclude", "--begin": "begin", "--mincpus": "mincpus", "--wait-all-nodes": "wait-all-nodes",
}
FLAGS = {"exclusive", "requeue", "no-requeue"}
NOT_APPLIED = {
    "account": "accounting is per VC here", "qos": "priorities come from the VC", "mail-type": "no mail is sent",
    "mail-user": "no mail is sent", "constraint": "use --gres=gpu:TYPE:N to ask for a GPU type",
    "exclusive": "a job holds its GPUs alone; CPUs are shared", "chdir": "the job runs in its own working dir",
    "export": "the task gets the job's environment", "gpu-bind": "each task sees exactly its GPUs",
    "cpu-bind": "not applied", "hint": "not applied", "signal": "hive-lab sends SIGTERM (SIGUSR1 with checkpoint)",
    "requeue": "use max_retries", "no-requeue": "jobs are not requeued unless max_retries says so",
    "open-mode": "logs are hive-lab's", "comment": "not applied", "reservation": "no reservations here",
    "nodelist": "the scheduler chooses the nodes", "exclude": "the scheduler chooses the nodes",
    "begin": "jobs start when placed", "mincpus": "use --cpus-per-task", "wait-all-nodes": "tasks start together",
    "output": "the log of each task is kept by hive-lab (hive-lab logs JOB)",
    "error": "the log of each task is kept by hive-lab (hive-lab logs JOB)",
}

SRUN_SHIM = r"""#!/bin/bash
# hive-lab's srun for sbatch scripts: the job's nodes are already placed, one task of the job on each,
# all running the script; this starts this node's share of the step's tasks, each with its
# SLURM_PROCID and SLURM_LOCALID, and exits with the first failure.
n="${SLURM_NTASKS_PER_NODE:-1}"
nodes="${SLURM_JOB_NUM_NODES:-1}"
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks-per-node=*) n="${1#*=}"; shift ;;
    --ntasks-per-node) n="$2"; shift 2 ;;
    -n|--ntasks) n=$(( ($2 + nodes - 1) / nodes )); shift 2 ;;
    --ntasks=*) v="${1#*=}"; n=$(( (v + nodes - 1) / nodes )); shift ;;
    -n[0-9]*) v="${1#-n}"; n=$(( (v + nodes - 1) / nodes )); shift ;;
    -N|--nodes|-c|--cpus-per-task|-G|--gpus|--gres|--mem|-J|--job-name|-o|--output|-e|--error|-t|--time|-p|--partition|--mpi|--cpu-bind|--gpus-per-task|--gpus-per-node|-m|--distribution|-w|--nodelist|--export|-K|--kill-on-bad-exit) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "srun: give a command" >&2; exit 2; }
export SLURM_NTASKS=$(( n * nodes )) SLURM_NPROCS=$(( n * nodes )) SLURM_STEP_NUM_TASKS=$(( n * nodes ))
pids=()
for ((i = 0; i < n; i++)); do
  SLURM_LOCALID=$i SLURM_PROCID=$(( ${SLURM_NODEID:-0} * n + i )) "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || { s=$?; [ $rc -eq 0 ] && rc=$s; }; done
exit $rc
"""


def directives(text: str) -> list[tuple[int, str, str | None]]:
    """(line number, canonical option, value) of each ``#SBATCH`` option before the first command."""
    out: list[tuple[int, str, str | None]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break
        body = stripped[len("#SBATCH"):].split(" #", 1)[0]
        try:
            words = shlex.split(body)
        except ValueError as exc:
            raise fail(f"line {number}", f"cannot read the #SBATCH line ({exc})") from None
        i = 0
        while i < len(words):
            word = words[i]
            if word.startswith("--") and "=" in word:
                opt, value = word.split("=", 1)
            elif not word.startswith("--") and word.startswith("-") and len(word) > 2 and word[:2] in OPTIONS:
                opt, value = word[:2], word[2:]
            else:
                opt, value = word, None
                canon = OPTIONS.get(opt)
                if canon is not None and canon not in FLAGS:
                    if i + 1 >= len(words):
                        raise fail(f"line {number}", f"{opt} needs a value")
                    value, i = words[i + 1], i + 1
            canon = OPTIONS.get(opt)
            out.append((number, canon or opt, value))
            i += 1
    return out


def _count(value: str | None, field: str) -> int:
    if value is None or not re.fullmatch(r"\d+", value):
        raise fail(field, f"give a whole number (got {value!r:.30})")
    return int(value)


def memory_mb(value: str, field: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", value.strip().upper())
    if not m:
        raise fail(field, f"give memory as a number with K, M, G or T (megabytes by default), e.g. 32G (got {value!r:.30})")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)]
    return max(0, math.ceil(float(m.group(1)) * scale))


def seconds(value: str, field: str) -> float | None:
    """Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; UNLIMITED/INFINITE: no limit."""
    v = value.strip()
    if v.upper() in ("UNLIMITED", "INFINITE", "0"):
        return None
    days = 0
    if "-" in v:
        d, v = v.split("-", 1)
        if not d.isdigit():
            raise fail(field, f"use M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (got {value!r:.30})")
        days = int(d)
        parts = v.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) > 3:
            raise fail(field, f"use M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (got {value!r:.30})")
        h, m, s = (parts + ["0", "0"])[:3]
        return days * 86400 + int(h) * 3600 + int(m) * 60 + int(s)
    parts = v.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise fail(field, f"use M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (got {value!r:.30})")
    nums = [int(p) for p in parts]
    if len(nums) == 1:
        return nums[0] * 60
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]


def _gres(value: str, field: str) -> tuple[int, str | None]:
    """``gpu:N``, ``gpu:TYPE:N``, ``gpu`` (one); other generic resources are refused."""
    gpus, gpu_type = 0, None
    for item in value.split(","):
        parts = item.split(":")
        if parts[0] != "gpu":
            raise fail(field, f"hive-lab schedules GPUs only; {parts[0]!r:.30} is not a resource here")
        if len(parts) == 1:
            gpus += 1
        elif len(parts) == 2:
            if parts[1].isdigit():
                gpus += int(parts[1])
            else:
                gpu_type, gpus = parts[1], gpus + 1
        elif len(parts) == 3 and parts[2].isdigit():
            gpu_type, gpus = parts[1], gpus + int(parts[2])
        else:
            raise fail(field, f"use gpu:N or gpu:TYPE:N (got {item!r:.30})")
    return gpus, gpu_type


def translate(text: str, name_hint: str | None = None) -> Translation:
    if not text.strip():
        raise fail("script", "the batch script is empty")
    opts: dict[str, tuple[int, str | None]] = {}
    notes: list[str] = []
    for number, opt, value in directives(text):
        if opt not in OPTIONS.values():
            raise fail(f"#SBATCH {opt}", f"line {number}: unknown sbatch option; remove it")
        opts[opt] = (number, value)
    def has(o: str) -> bool:
        return o in opts
    def val(o: str) -> str | None:
        return opts[o][1] if o in opts else None
    array = None
    if has("array"):  # Slurm's syntax is hive-lab's (wire/array_spec.py): one element per index
        from hive_lab_server.wire.array_spec import parse_array

        array = (val("array") or "").strip()
        try:
            indices, _ = parse_array(array)
        except SpecError as exc:
            raise fail("#SBATCH --array", exc.message.split(": ", 1)[-1]) from None
        if not indices:
            raise fail("#SBATCH --array", "give the indices, e.g. --array=0-9%2")
    depends_on = _dependencies(val("dependency")) if has("dependency") else []
    nodes_v = val("nodes")
    if nodes_v is not None and "-" in nodes_v:
        low = nodes_v.split("-", 1)[0]
        notes.append(f"#SBATCH --nodes={nodes_v}: a range; {low} nodes are used")
        nodes_v = low
    nodes = _count(nodes_v, "#SBATCH --nodes") if nodes_v is not None else None
    ntasks = _count(val("ntasks"), "#SBATCH --ntasks") if has("ntasks") else None
    per_node = _count(val("ntasks-per-node"), "#SBATCH --ntasks-per-node") if has("ntasks-per-node") else None
    if nodes is None:
        nodes = 1 if ntasks is None or per_node is None else max(1, math.ceil(ntasks / per_node))
    if nodes < 1:
        raise fail("#SBATCH --nodes", "give at least one node")
    if per_node is None:
        per_node = max(1, math.ceil(ntasks / nodes)) if ntasks else 1
    if ntasks is not None and ntasks != per_node * nodes:
        notes.append(f"#SBATCH --ntasks={ntasks}: {per_node} tasks on each of {nodes} nodes (srun starts "
                     f"{per_node * nodes})")
    gpus, gpu_type = 0, None
    if has("gres"):
        gpus, gpu_type = _gres(val("gres") or "", "#SBATCH --gres")
    elif has("gpus-per-node"):
        v = val("gpus-per-node") or ""
        gpu_type, _, n = v.rpartition(":")
        gpus, gpu_type = _count(n, "#SBATCH --gpus-per-node"), gpu_type or None
    elif has("gpus-per-task"):
        v = val("gpus-per-task") or ""
        gpu_type, _, n = v.rpartition(":")
        gpus, gpu_type = _count(n, "#SBATCH --gpus-per-task") * per_node, gpu_type or None
    elif has("gpus"):
        v = val("gpus") or ""
        gpu_type, _, n = v.rpartition(":")
        total = _count(n, "#SBATCH --gpus")
        gpu_type = gpu_type or None
        if total % nodes:
            raise fail("#SBATCH --gpus", f"{total} GPUs do not split evenly over {nodes} nodes; use --gpus-per-node")
        gpus = total // nodes
    cpus_per_task = float(_count(val("cpus-per-task"), "#SBATCH --cpus-per-task")) if has("cpus-per-task") else 1.0
    cpus = cpus_per_task * per_node
    memory = 1024
    if has("mem"):
        memory = memory_mb(val("mem") or "", "#SBATCH --mem")
        if memory == 0:
            notes.append("#SBATCH --mem=0: all of a node's memory is not reserved here; 0 MB is asked for")
    elif has("mem-per-cpu"):
        memory = memory_mb(val("mem-per-cpu") or "", "#SBATCH --mem-per-cpu") * math.ceil(cpus)
    elif has("mem-per-gpu"):
        memory = memory_mb(val("mem-per-gpu") or "", "#SBATCH --mem-per-gpu") * gpus
    name = val("job-name") or name_hint or "sbatch"
    request: dict[str, Any] = {
        "name": job_name(name),
        "tasks": [{"name": "node", "count": nodes, "gpus": gpus, "cpus": cpus, "memory_mb": memory,
                   **({"gpu_type": gpu_type} if gpu_type else {})}],
        "command": f'exec bash "$HIVE_WORKING_DIR/{RUN}"',
        "files": {SCRIPT: text, SRUN: SRUN_SHIM, RUN: RUN_SH},
        "env": {"SLURM_JOB_NAME": str(name), "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NNODES": str(nodes),
                "SLURM_NTASKS": str(per_node * nodes), "SLURM_NPROCS": str(per_node * nodes),
                "SLURM_NTASKS_PER_NODE": str(per_node), "SLURM_CPUS_PER_TASK": f"{cpus_per_task:g}",
                "SLURM_CPUS_ON_NODE": f"{cpus:g}", "SLURM_GPUS_ON_NODE": str(gpus),
                "SLURM_MEM_PER_NODE": str(memory), "SLURM_TASKS_PER_NODE": f"{per_node}(x{nodes})" if nodes > 1 else str(per_node)},
    }
    if has("time"):
        limit = seconds(val("time") or "", "#SBATCH --time")
        if limit:
            request["time_limit_s"] = limit
    vc = vc_from(val("partition"), "#SBATCH --partition", notes)
    if vc:
        request["vc"] = vc
        request["env"]["SLURM_JOB_PARTITION"] = val("partition") or ""
    for opt, why in NOT_APPLIED.items():
        if has(opt):
            notes.append(f"#SBATCH --{opt}: not applied ({why})")
    if nodes > 1:
        notes.append(f"#SBATCH --nodes={nodes}: {nodes} tasks placed by their GPUs; two may share a node when they "
                     "fit in one (ask for a node's GPUs, --gres=gpu:N, to have a node each)")
        notes.append("script: runs on each of the nodes (SLURM_NODEID tells which); srun starts each node's share of "
                     "a step, so lines outside srun run once per node")
    if depends_on:
        request["depends_on"] = depends_on
    return Translation(format="sbatch", request=request, original=text, not_applied=notes,
                       runtime={"platform": "slurm", **({"array": array} if array else {})})


SLURM_WHEN = {"afterok": "succeeded", "afternotok": "failed", "afterany": "ended"}
_DEP_ID = re.compile(r"^[ja]-\d+$")


def _dependencies(value: str | None) -> list[dict[str, str]]:
    """``--dependency=afterok:j-000012:a-000003,afterany:j-000014`` -> hive-lab's ``depends_on``. The ids
    are hive-lab's (a job's ``j-...``, an array's ``a-...``): Slurm's numbers mean nothing here."""
    where = "#SBATCH --dependency"
    if not value or "?" in value:
        raise fail(where, "give afterok:JOB, afternotok:JOB or afterany:JOB (','-separated; '?' is not supported)")
    out = []
    for part in value.split(","):
        kind, _, ids = part.strip().partition(":")
        if kind not in SLURM_WHEN:
            raise fail(where, f"{kind or part!r}: hive-lab waits for jobs with afterok, afternotok or afterany "
                              "(after, aftercorr, singleton and expand are not supported)")
        for ref in ids.split(":"):
            ref = ref.strip().split("+", 1)[0]
            if not _DEP_ID.match(ref):
                raise fail(where, f"{ref!r} is not a hive-lab job id; name jobs as hive-lab does (j-000012, or an "
                                  "array a-000003): Slurm's job numbers mean nothing here")
            out.append({"job": ref, "when": SLURM_WHEN[kind]})
    return out
