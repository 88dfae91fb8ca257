"""OpenPAI's job protocol v1 (JSON: ``jobName``, ``image``, ``taskRoles`` as a list) as a hive-lab job.

Every field OpenPAI's v1 documented is read with its meaning there: empty optional strings are absent;
``retryCount`` -1/-2 (retry without limit) is hive-lab's largest, 100; ``portList`` reserves ports
(``PAI_*`` port variables at launch); ``dataDir``/``outputDir``/``codeDir`` (HDFS URIs) become
``PAI_DATA_DIR``/``PAI_OUTPUT_DIR``/``PAI_CODE_DIR``; ``gpuType`` is the GPU type; ``jobEnvs`` the
environment. What hive-lab does not do (``killAllOnCompletedTaskNumber``, ``shmMB``, ``authFile``, HDFS) is
reported, each with what happens instead.
"""

from __future__ import annotations

from typing import Any

from hive_lab_server.api.formats.common import (ABSENT, Translation, completion_count, image_not_applied, env_value, fail, is_int, job_name, task_name, vc_from,
                     want_dict, want_int, want_list, want_str)

TOP_FIELDS = {"jobName", "image", "authFile", "dataDir", "outputDir", "codeDir", "virtualCluster", "taskRoles",
              "gpuType", "retryCount", "jobEnvs", "extras", "killAllOnCompletedTaskNumber", "jobPriority"}
ROLE_FIELDS = {"name", "taskNumber", "cpuNumber", "memoryMB", "shmMB", "gpuNumber", "portList", "command",
               "minFailedTaskCount", "minSucceededTaskCount", "gpuType"}
MAX_RETRIES = 100


def _opt_str(doc: dict, key: str) -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        return None
    return want_str(value, key)


def translate(doc: dict, *, ignore_image: bool = False) -> Translation:
    """``ignore_image``: ``image`` is not applied (noted); the commands run as processes."""
    notes: list[str] = []
    for key in sorted(set(doc) - TOP_FIELDS):
        raise fail(key, f"unknown field of OpenPAI's protocol v1; remove it (fields: {', '.join(sorted(TOP_FIELDS))})")
    name = doc.get("jobName")
    if name is None or name == "":
        raise fail("jobName", "this field is required in OpenPAI's protocol v1; add it")
    name = want_str(name, "jobName")
    env: dict[str, str] = {"PAI_JOB_NAME": name}
    dirs: dict[str, str] = {}
    for key, var, native in (("dataDir", "PAI_DATA_DIR", "data_dir"), ("outputDir", "PAI_OUTPUT_DIR", "output_dir"),
                             ("codeDir", "PAI_CODE_DIR", "working_dir")):
        value = _opt_str(doc, key)
        if value is not None and value.startswith("/") and native == "data_dir":  # a path on this cluster
            dirs[native] = value
            env[var] = value
        elif value is not None and value.startswith("/"):
            env[var] = value
            notes.append(f"{key}: {value!r} is given to the tasks as {var}; every hive-lab job runs in its own "
                         f"directory (HIVE_WORKING_DIR, output in HIVE_OUTPUT_DIR), so its tasks start there")
        elif value is not None:
            env[var] = value.replace("$PAI_DEFAULT_FS_URI", "").replace("${PAI_DEFAULT_FS_URI}", "")
            notes.append(f"{key}: {value!r} is given to the tasks as {var}; hive-lab has no HDFS, so nothing is "
                         + ("copied into code/" if key == "codeDir" else "mounted"))
    if _opt_str(doc, "authFile"):
        notes.append("authFile: registry credentials are not read; pre-pull private images")
    for key, value in want_dict(doc.get("jobEnvs") or {}, "jobEnvs").items():
        if key in ("isDebug", "paiAzRDMA"):
            notes.append(f"jobEnvs.{key}: OpenPAI's switch is not applied here (given to the tasks as it is)")
        env[str(key)] = env_value(value)
    retry = doc.get("retryCount", 0)
    retry = 0 if retry is None or retry == "" else want_int(retry, "retryCount")
    if retry < -2:
        raise fail("retryCount", f"use -2, -1 (retry without limit) or a count >= 0 (got {retry})")
    if retry < 0 or retry > MAX_RETRIES:
        notes.append(f"retryCount: {retry} is retried at most {MAX_RETRIES} times here")
    max_retries = MAX_RETRIES if retry < 0 else min(retry, MAX_RETRIES)
    job_gpu_type = _opt_str(doc, "gpuType")
    roles = doc.get("taskRoles")
    if not isinstance(roles, list) or not roles:
        raise fail("taskRoles", "this field is required: give a list of task roles (at least one)")
    tasks: list[dict[str, Any]] = []
    ports: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for i, role in enumerate(roles):
        field = f"taskRoles[{i}]"
        role = want_dict(role, field)
        for key in sorted(set(role) - ROLE_FIELDS):
            raise fail(f"{field}.{key}", f"unknown field of a v1 task role; remove it (fields: {', '.join(sorted(ROLE_FIELDS))})")
        rname = task_name(role.get("name", "main"), f"{field}.name")
        if rname in seen:
            raise fail(f"{field}.name", f"task role name {rname!r} is used twice; give each role its own name")
        seen.add(rname)
        count = want_int(role.get("taskNumber", 1), f"{field}.taskNumber", 1)
        gpus = role.get("gpuNumber", 0)
        if not (is_int(gpus) or isinstance(gpus, float)):
            raise fail(f"{field}.gpuNumber", f"must be a number of GPUs (got {gpus!r:.20})")
        cpus = role.get("cpuNumber", 1)
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus < 0:
            raise fail(f"{field}.cpuNumber", f"must be a number of CPUs (got {cpus!r:.20})")
        memory = want_int(role.get("memoryMB", 1024), f"{field}.memoryMB", 0)
        command = role.get("command")
        if command is None or (isinstance(command, str) and not command.strip()):
            raise fail(f"{field}.command", "this field is required: give the command this role runs (it cannot be empty)")
        want_str(command, f"{field}.command")
        if role.get("shmMB") is not None:
            want_int(role["shmMB"], f"{field}.shmMB", 0)
            notes.append(f"{field}.shmMB: not applied (the launcher's /dev/shm size holds)")
        role_ports: dict[str, int] = {}
        for j, p in enumerate(want_list(role.get("portList") or [], f"{field}.portList")):
            p = want_dict(p, f"{field}.portList[{j}]")
            label = want_str(p.get("label"), f"{field}.portList[{j}].label")
            role_ports[label] = want_int(p.get("portNumber", 1), f"{field}.portList[{j}].portNumber", 0)
            if p.get("beginAt") not in (None, 0):
                notes.append(f"{field}.portList[{j}].beginAt: {p['beginAt']} not applied; free ports are chosen "
                             f"(PAI_CONTAINER_HOST_{label}_PORT_LIST says which)")
        ports[rname] = role_ports
        policy = {"min_failed": completion_count(role.get("minFailedTaskCount", ABSENT),
                                                 f"{field}.minFailedTaskCount", count, 1),
                  "min_succeeded": completion_count(role.get("minSucceededTaskCount", ABSENT),
                                                    f"{field}.minSucceededTaskCount", count, None)}
        gpu_type = _opt_str(role, "gpuType") or job_gpu_type
        tasks.append({"name": rname, "count": count, "gpus": gpus, "cpus": cpus, "memory_mb": memory,
                      "command": command, **policy, **({"gpu_type": gpu_type} if gpu_type else {})})
    if doc.get("killAllOnCompletedTaskNumber") not in (None, 0):
        want_int(doc["killAllOnCompletedTaskNumber"], "killAllOnCompletedTaskNumber", 0)
        notes.append("killAllOnCompletedTaskNumber: not applied; the job ends when all its tasks have ended")
    if doc.get("extras"):
        notes.append(f"extras: {', '.join(map(str, want_dict(doc['extras'], 'extras')))} not applied")
    request: dict[str, Any] = {"name": job_name(name), "tasks": tasks, "env": env, **dirs}
    if doc.get("retryCount") not in (None, ""):  # else hive-lab's default (opportunistic jobs retry)
        request["max_retries"] = max_retries
    image = _opt_str(doc, "image")
    if image and ignore_image:
        notes.append(image_not_applied("image", [image]))
    elif image:
        request["image"] = image
    vc = vc_from(doc.get("virtualCluster"), "virtualCluster", notes)
    if vc:
        request["vc"] = vc
    if "jobPriority" in doc:
        request["priority"] = doc["jobPriority"]
    return Translation(format="openpai-v1", request=request, original=doc, not_applied=notes,
                       runtime={"platform": "openpai", "ports": ports})
