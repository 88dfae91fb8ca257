"""The environment a platform gives its tasks, added at launch to a job that came in that platform's
format: OpenPAI's ``PAI_*``, Slurm's ``SLURM_*``, Kubernetes' indexed-job and Volcano's variables.
One call per launch: ports are chosen once, so every task sees the same table. The job's stored spec
is read through its typed view (``wire.launch_spec.LaunchSpec``)."""

from __future__ import annotations

from typing import Callable

from hive_lab_server.wire.array_spec import parse_array
from hive_lab_server.wire.launch_spec import LaunchSpec


def _openpai(spec: LaunchSpec, placement: list, address: Callable[[str], str], free_port: Callable[[], int],
             ports: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    roles = [t.name for t in spec.tasks]
    counts = {t.name: t.count for t in spec.tasks}
    by_task = {p.task: p for p in placement}
    chosen: dict[str, dict[str, list[int]]] = {}
    common: dict[str, str] = {"PAI_TASK_ROLE_COUNT": str(len(roles)), "PAI_TASK_ROLE_LIST": ",".join(roles),
                              "PAI_DEFAULT_FS_URI": "", "PAI_JOB_VC_NAME": spec.vc or ""}
    hosts: dict[str, list[str]] = {r: [] for r in roles}
    for t in spec.tasks:
        role = t.name
        cpus = 1 if t.cpus is None else t.cpus
        memory_mb = 0 if t.memory_mb is None else t.memory_mb
        common[f"PAI_TASK_ROLE_TASK_COUNT_{role}"] = str(t.count)
        common[f"PAI_RESOURCE_{role}"] = f"{t.gpus:g},{cpus:g},{memory_mb},64"
        common[f"PAI_MIN_FAILED_TASK_COUNT_{role}"] = "1"
        common[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{role}"] = "-1"
    for p in sorted(placement, key=lambda q: q.rank):
        role, i = p.group, p.index
        ip = address(p.node)
        labels = dict(ports.get(role, {}))
        labels.setdefault("default", 1)  # the task's own port: PAI_CONTAINER_HOST_PORT, the HOST_LIST's port
        chosen[p.task] = {label: [free_port() for _ in range(max(n, 1) if label == "default" else n)]
                          for label, n in labels.items()}
        common[f"PAI_HOST_IP_{role}_{i}"] = ip
        for label, nums in chosen[p.task].items():
            if label == "default":
                continue
            common[f"PAI_PORT_LIST_{role}_{i}_{label}"] = ",".join(map(str, nums))
            if nums:
                common[f"PAI_{role}_{i}_{label}_PORT"] = str(nums[0])
        hosts[role].append(f"{ip}:{chosen[p.task]['default'][0]}")
    for role in roles:
        common[f"PAI_TASK_ROLE_{role}_HOST_LIST"] = ",".join(hosts[role])
    out = {}
    for task, p in by_task.items():
        env = dict(common)
        own = chosen[task]
        ip = address(p.node)
        env.update({"PAI_TASK_ROLE_NAME": p.group, "PAI_CURRENT_TASK_ROLE_NAME": p.group,
                    "PAI_TASK_INDEX": str(p.index), "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(p.index),
                    "PAI_TASK_ROLE_INDEX": str(list(counts).index(p.group)),
                    "PAI_CONTAINER_HOST_IP": ip, "PAI_CURRENT_CONTAINER_IP": ip,
                    "PAI_CONTAINER_HOST_PORT": str(own["default"][0]), "PAI_CURRENT_CONTAINER_PORT": str(own["default"][0]),
                    "PAI_CONTAINER_ID": f"{spec.name or 'job'}-{task}"})
        for label, nums in own.items():
            if label != "default":
                env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = ",".join(map(str, nums))
        env.update(_openpai_element(spec, p.group))
        out[task] = env
    return out


def _openpai_element(spec: LaunchSpec, role: str) -> dict[str, str]:
    """An instance of a role run without gang (``extras.gangAllocation: false``, an array element): its
    index and its role's instance count as OpenPAI gives them, from hive-lab's array variables."""
    index = spec.env.get("HIVE_ARRAY_INDEX")
    if index is None or not spec.runtime.instances:
        return {}
    completion = spec.runtime.completion
    return {"PAI_TASK_INDEX": index, "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": index,
            f"PAI_TASK_ROLE_TASK_COUNT_{role}": str(spec.runtime.instances),
            f"PAI_MIN_FAILED_TASK_COUNT_{role}": str(completion.get("min_failed") or -1),
            f"PAI_MIN_SUCCEEDED_TASK_COUNT_{role}": str(completion.get("min_succeeded") or -1)}


def _slurm(spec: LaunchSpec, placement: list, address: Callable[[str], str]) -> dict[str, dict[str, str]]:
    ordered = sorted(placement, key=lambda q: q.rank)
    nodelist = ",".join(address(p.node) for p in ordered)
    per_node = int(spec.env.get("SLURM_NTASKS_PER_NODE", "1"))
    out = {}
    for p in ordered:
        out[p.task] = {"SLURM_NODEID": str(p.index), "SLURM_PROCID": str(p.index * per_node), "SLURM_LOCALID": "0",
                       "SLURM_JOB_NODELIST": nodelist, "SLURM_NODELIST": nodelist, "SLURMD_NODENAME": p.node,
                       "SLURM_TOPOLOGY_ADDR": p.node, "SLURM_CLUSTER_NAME": "hive-lab", **_slurm_array(spec)}
    return out


def _slurm_array(spec: LaunchSpec) -> dict[str, str]:
    """An element of an ``#SBATCH --array`` job: Slurm's array variables, from hive-lab's own."""
    env = spec.env
    array = spec.runtime.array
    if "HIVE_ARRAY_INDEX" not in env or not array:
        return {}
    indices, _ = parse_array(array)
    out = {"SLURM_ARRAY_TASK_ID": env["HIVE_ARRAY_INDEX"], "SLURM_ARRAY_JOB_ID": env.get("HIVE_ARRAY_ID", ""),
           "SLURM_ARRAY_TASK_COUNT": str(len(indices)), "SLURM_ARRAY_TASK_MIN": str(min(indices)),
           "SLURM_ARRAY_TASK_MAX": str(max(indices))}
    return out


def _indexed(spec: LaunchSpec, placement: list, address: Callable[[str], str], volcano: bool) -> dict[str, dict[str, str]]:
    out = {}
    hosts: dict[str, list[str]] = {}
    for p in sorted(placement, key=lambda q: q.rank):
        hosts.setdefault(p.group, []).append(address(p.node))
    for p in placement:
        env = {"JOB_COMPLETION_INDEX": str(p.index)}
        if volcano:
            env.update({"VC_TASK_INDEX": str(p.index), "VK_TASK_INDEX": str(p.index)})
            for group, addrs in hosts.items():
                key = group.upper().replace("-", "_").replace(".", "_")
                env[f"VC_{key}_HOSTS"] = ",".join(addrs)
                env[f"VC_{key}_NUM"] = str(len(addrs))
        out[p.task] = env
    return out


def platform_env(spec: LaunchSpec, placement: list, address: Callable[[str], str],
                 free_port: Callable[[], int]) -> dict[str, dict[str, str]]:
    """task name -> the variables its platform gives it (empty for hive-lab's own jobs)."""
    platform = spec.runtime.platform
    if platform == "openpai":
        return _openpai(spec, placement, address, free_port, spec.runtime.ports)
    if platform == "slurm":
        return _slurm(spec, placement, address)
    if platform in ("kubernetes", "volcano"):
        return _indexed(spec, placement, address, platform == "volcano")
    return {}
