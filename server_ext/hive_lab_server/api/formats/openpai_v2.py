"""OpenPAI's job protocol v2 (YAML, ``protocolVersion: 2``, task roles as a map) as a hive-lab job.

Also the protocol's 2018 draft that OpenPAI's marketplace still holds (``protocol_version: v2``,
``tasks`` as a list with ``role`` and ``resource``, ``$$name$$`` references): it is rewritten into the
final form first.

References: ``<% $parameters.x %>`` become their value; ``<% $secrets.x %>`` become ``${PAI_SECRET_x}``,
an environment variable the task gets at launch (the value is kept encrypted, never in the spec);
``<% $data|script|output.field %>`` the role's prerequisite's field. The runtime environment OpenPAI
gives tasks (``PAI_*``) is added at launch by ``execution.runtime_env``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from hive_lab_server.api.formats.common import (ABSENT, NO_IMAGE_HINT, SECRET_MASK, Translation, completion_count, env_value, fail, is_int, job_name, task_name,
                     vc_from, want_dict, want_int, want_list, want_str, image_not_applied)

TOP_FIELDS = {"protocolVersion", "name", "type", "version", "contributor", "description", "prerequisites",
              "parameters", "secrets", "jobRetryCount", "taskRoles", "deployments", "defaults", "extras"}
ROLE_FIELDS = {"instances", "completion", "taskRetryCount", "dockerImage", "data", "output", "script",
               "extraContainerOptions", "resourcePerInstance", "commands"}
PRIORITY_CLASSES = {"crit": 1000, "prod": 100, "test": 10, "oppo": "opportunistic"}  # OpenPAI's, for HiveD
RUNTIME_PLUGINS_HERE = {"cmd"}
REF = re.compile(r"<%\s*\$(\w+)((?:\.[A-Za-z0-9_-]+|\[\d+\])*)\s*%>")


def is_draft(doc: dict) -> bool:
    return "protocol_version" in doc or isinstance(doc.get("tasks"), list) and "taskRoles" not in doc


def from_draft(doc: dict, notes: list[str]) -> dict:
    """The 2018 draft (marketplace) in the final protocol's shape; ``$$x$$`` become ``<% %>`` references."""
    prereqs = [dict(p) for p in (doc.get("prerequisites") or []) if isinstance(p, dict)]
    kinds = {p.get("name"): p.get("type") for p in prereqs}
    params = doc.get("parameters") or {}

    def refs(text: str, role: dict) -> str:
        def one(m: re.Match) -> str:
            key = m.group(1)
            if key in params:
                return f"<% $parameters.{key} %>"
            for kind in ("data", "script", "output"):
                if role.get(kind) == key:
                    return key  # the draft's $$data$$ is the folder the prerequisite's commands made
            return m.group(0)
        return re.sub(r"\$\$([A-Za-z0-9_-]+)\$\$", one, text)

    roles: dict[str, Any] = {}
    pre: dict[str, list[str]] = {}
    for i, t in enumerate(want_list(doc.get("tasks"), "tasks")):
        t = want_dict(t, f"tasks[{i}]")
        name = t.get("role") or f"role{i}"
        res = want_dict(t.get("resource") or {}, f"tasks[{i}].resource")
        commands = [refs(str(c), t) for c in (t.get("command") or [])]
        roles[name] = {"instances": res.get("instances", 1), "dockerImage": t.get("dockerimage"),
                       "resourcePerInstance": res.get("resourcePerInstance") or {}, "commands": commands}
        # the draft's prerequisites carry the commands that fetch them (data, script) or save them (output)
        before = [str(c) for kind in ("data", "script") for p in prereqs
                  if p.get("name") == t.get(kind) and kinds.get(t.get(kind)) == kind for c in (p.get("command") or [])]
        after = [str(c) for p in prereqs if p.get("name") == t.get("output") and kinds.get(t.get("output")) == "output"
                 for c in (p.get("command") or [])]
        for kind in ("data", "script", "output"):
            if t.get(kind):
                before.insert(0, f"mkdir -p {t[kind]}")
        pre[name] = before
        if after:
            roles[name]["_post"] = after
        for key in sorted(set(t) - {"role", "resource", "command", "dockerimage", "data", "script", "output"}):
            notes.append(f"tasks[{i}].{key}: not part of the protocol; not applied")
    out = {"protocolVersion": 2, "name": doc.get("name"), "prerequisites": [
        {k: v for k, v in p.items() if k not in ("command", "protocol_version")} for p in prereqs],
        "parameters": params, "taskRoles": roles,
        "jobRetryCount": doc.get("retryCount", doc.get("jobRetryCount", 0))}
    for name, cmds in pre.items():
        roles[name]["_pre"] = cmds
    for key in sorted(set(doc) - {"protocol_version", "name", "type", "version", "contributor", "description",
                                  "retryCount", "parameters", "tasks", "prerequisites"}):
        notes.append(f"{key}: not part of the protocol; not applied")
    return out


def _lookup(obj: Any, path: str, where: str) -> Any:
    for part in re.findall(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]", path):
        key, idx = part
        if key and isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif idx and isinstance(obj, list) and int(idx) < len(obj):
            obj = obj[int(idx)]
        else:
            raise fail(where, f"the reference to {path.lstrip('.')!r} names nothing in the job")
    return obj


def substitute(text: str, scope: dict[str, Any], secrets: dict[str, Any], where: str) -> str:
    def one(m: re.Match) -> str:
        kind, path = m.group(1), m.group(2)
        if kind == "secrets":
            name = path.lstrip(".")
            if name not in secrets:
                raise fail(where, f"<% $secrets.{name} %> names no entry of secrets; add it there")
            return "${PAI_SECRET_" + name + "}"
        if kind not in scope or scope[kind] is None:
            raise fail(where, f"<% ${kind}{path} %>: ${kind} is not defined for this task role")
        value = _lookup(scope[kind], path, where) if path else scope[kind]
        return env_value(value) if not isinstance(value, (dict, list)) else str(value)
    return REF.sub(one, text)


def masked(doc: dict, secret_names: set[str]) -> dict:
    out = copy.deepcopy(doc)
    if isinstance(out.get("secrets"), dict):
        out["secrets"] = {k: SECRET_MASK for k in out["secrets"]}
    for p in out.get("prerequisites") or []:
        auth = p.get("auth") if isinstance(p, dict) else None
        if isinstance(auth, dict):
            for key in ("password", "passward"):  # the protocol's first draft spelled it passward
                if key in auth and not REF.fullmatch(str(auth[key]).strip()):
                    auth[key] = SECRET_MASK
    return out


def _hived(extras: dict, roles: dict, notes: list[str]) -> tuple[Any, dict[str, dict]]:
    """extras.hivedScheduler: HiveD's request (priority class, per-role SKU type and count, pinned cell,
    affinity group) onto hive-lab's: priority, gpu_type; a job is always one gang here."""
    key = "hivedScheduler" if "hivedScheduler" in extras else "hivedscheduler"
    hived = want_dict(extras.get(key) or {}, f"extras.{key}")
    priority = None
    pclass = hived.get("jobPriorityClass")
    if pclass is not None:
        if pclass not in PRIORITY_CLASSES:
            raise fail(f"extras.{key}.jobPriorityClass", f"use one of {', '.join(PRIORITY_CLASSES)} (got {pclass!r:.30})")
        priority = PRIORITY_CLASSES[pclass]
    per_role: dict[str, dict] = {}
    groups = set()
    pins: set[str] = set()
    for rname, r in want_dict(hived.get("taskRoles") or {}, f"extras.{key}.taskRoles").items():
        field = f"extras.{key}.taskRoles.{rname}"
        if rname not in roles:
            raise fail(field, f"names no task role of taskRoles ({', '.join(roles)})")
        r = want_dict(r or {}, field)
        gpu_type = r.get("skuType") or r.get("gpuType") or r.get("leafCellType")
        sku_num = r.get("skuNum")
        per_role[rname] = {"gpu_type": gpu_type, "sku_num": sku_num}
        pinned = r.get("pinnedCellId") or r.get("reservationId")  # reservationId: HiveD's older name
        if pinned:
            which = "pinnedCellId" if r.get("pinnedCellId") else "reservationId"
            want_str(pinned, f"{field}.{which}")
            if pins and pinned not in pins:
                raise fail(f"{field}.{which}", f"a job runs in one pinned cell here (its tasks are one gang); "
                                               f"{rname} names {pinned!r}, another role {next(iter(pins))!r}")
            pins.add(pinned)
        if r.get("affinityGroupName"):
            groups.add(r["affinityGroupName"])
        for k in sorted(set(r) - {"skuType", "gpuType", "leafCellType", "skuNum", "affinityGroupName",
                                  "pinnedCellId", "reservationId"}):
            notes.append(f"{field}.{k}: not a HiveD request field; not applied")
    if len(groups) > 1:
        notes.append(f"extras.{key}.taskRoles: affinity groups {', '.join(sorted(groups))} are placed as one gang "
                     "(hive-lab places a job's tasks all or nothing)")
    for k in sorted(set(hived) - {"jobPriorityClass", "taskRoles"}):
        notes.append(f"extras.{key}.{k}: not applied")
    if pins:  # a role without one shares the gang's cell
        per_role["*"] = {"pinned_cell": next(iter(pins))}
    return priority, per_role


def _plugins(extras: dict, notes: list[str]) -> dict[str, dict[str, list[str]]]:
    """Runtime plugins: ``cmd`` (commands before and after each role's) runs here; the rest are reported."""
    hooks: dict[str, dict[str, list[str]]] = {}
    plugins = extras.get("com.microsoft.pai.runtimeplugin") or []
    for i, p in enumerate(want_list(plugins, "extras.com.microsoft.pai.runtimeplugin")):
        field = f"extras.com.microsoft.pai.runtimeplugin[{i}]"
        p = want_dict(p, field)
        name = p.get("plugin")
        if name == "cmd":
            params = want_dict(p.get("parameters") or {}, f"{field}.parameters")
            roles = p.get("taskroles") or p.get("taskRoles")
            hooks.setdefault("*" if not roles else ",".join(roles), {}).update(
                pre=[str(c) for c in params.get("callbacks", {}).get("preCommands", params.get("preCommands", []))],
                post=[str(c) for c in params.get("callbacks", {}).get("postCommands", params.get("postCommands", []))])
        else:
            why = {"ssh": "tasks reach each other over the network directly; no SSH keys are set up",
                   "teamwise_storage": "OpenPAI's storage configs do not exist here; use data_dir or files",
                   "tensorboard": "no TensorBoard is started; run it in JupyterLab"}.get(name, "unknown here")
            notes.append(f"{field}: runtime plugin {name!r} not applied ({why})")
    return hooks


def translate(doc: dict, *, ignore_image: bool = False) -> Translation:
    """``ignore_image``: the roles' dockerImage is not applied (noted); the commands run as processes."""
    notes: list[str] = []
    original_doc = doc
    if is_draft(doc):
        doc = from_draft(doc, notes)
    else:
        version = doc.get("protocolVersion")
        if str(version) not in ("2", "2.0"):
            raise fail("protocolVersion", f"this is OpenPAI's protocol v2, which says protocolVersion: 2 (got {version!r:.20})")
        if doc.get("type", "job") != "job":
            raise fail("type", f"a job is type: job; a {doc.get('type')!r:.20} component is a prerequisite, not a job")
    for key in sorted(set(doc) - TOP_FIELDS):
        notes.append(f"{key}: not a field of the protocol; not applied")
    name = doc.get("name")
    if not isinstance(name, (str, int, float)) or str(name).strip() == "":
        raise fail("name", "the job needs a name (protocol v2's name: ...)")
    params = want_dict(doc.get("parameters") or {}, "parameters")
    secrets = want_dict(doc.get("secrets") or {}, "secrets")
    for sname in secrets:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(sname)):
            raise fail(f"secrets.{sname}", "a secret's name is letters, digits and _ (it becomes PAI_SECRET_<name>)")
    prereqs: dict[str, dict] = {}
    for i, p in enumerate(want_list(doc.get("prerequisites") or [], "prerequisites")):
        p = want_dict(p, f"prerequisites[{i}]")
        pname = p.get("name")
        if pname is None:
            raise fail(f"prerequisites[{i}].name", "each prerequisite needs a name that task roles refer to")
        if p.get("type") not in ("dockerimage", "data", "script", "output"):
            raise fail(f"prerequisites[{i}].type", f"use dockerimage, data, script or output (got {p.get('type')!r:.20})")
        prereqs[str(pname)] = p
        if p.get("type") == "dockerimage" and p.get("auth"):
            notes.append(f"prerequisites[{i}].auth: registry credentials are not used; the image is pulled as the "
                         "launcher's engine is configured (pre-pull private images)")
        if p.get("type") in ("data", "output", "script"):
            notes.append(f"prerequisites[{i}]: {p['type']} {pname!r} is not fetched by hive-lab; its fields are "
                         "available to <% $" + p["type"] + ".x %> and the role's commands fetch it")
    roles = want_dict(doc.get("taskRoles"), "taskRoles") if doc.get("taskRoles") is not None else None
    if not roles:
        raise fail("taskRoles", "give at least one task role (taskRoles: {name: {...}})")
    extras = want_dict(doc.get("extras") or {}, "extras")
    priority, hived = _hived(extras, roles, notes) if ("hivedScheduler" in extras or "hivedscheduler" in extras) else (None, {})
    hooks = _plugins(extras, notes)
    for k in sorted(set(extras) - {"hivedScheduler", "hivedscheduler", "com.microsoft.pai.runtimeplugin",
                                   "gangAllocation", "submitFrom"}):
        notes.append(f"extras.{k}: not applied")
    defaults = want_dict(doc.get("defaults") or {}, "defaults")
    deployment = None
    if defaults.get("deployment") is not None:
        want_str(defaults["deployment"], "defaults.deployment")
        deps = {d.get("name"): d for d in want_list(doc.get("deployments") or [], "deployments") if isinstance(d, dict)}
        if defaults["deployment"] not in deps:
            raise fail("defaults.deployment", f"names no deployment (deployments: {', '.join(map(str, deps)) or 'none'})")
        deployment = deps[defaults["deployment"]]
    elif doc.get("deployments"):
        notes.append("deployments: none is chosen by defaults.deployment, so none runs")
    images: dict[str, str] = {}
    tasks: list[dict] = []
    ports: dict[str, dict[str, int]] = {}
    retries: dict[str, int] = {}
    for rname, role in roles.items():
        field = f"taskRoles.{rname}"
        task_name(str(rname), field)
        role = want_dict(role, field)
        for key in sorted(set(role) - ROLE_FIELDS - {"_pre", "_post"}):
            notes.append(f"{field}.{key}: not a field of a task role; not applied")
        count = want_int(role.get("instances", 1), f"{field}.instances", 1)
        res = want_dict(role.get("resourcePerInstance"), f"{field}.resourcePerInstance") \
            if role.get("resourcePerInstance") is not None else None
        if res is None:
            raise fail(f"{field}.resourcePerInstance", "give the resources of each instance (cpu, memoryMB, gpu)")
        gpus = want_int(res.get("gpu", 0), f"{field}.resourcePerInstance.gpu", 0)
        cpus = res.get("cpu", 1)
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus < 0:
            raise fail(f"{field}.resourcePerInstance.cpu", f"must be a number of CPUs (got {cpus!r:.20})")
        memory = want_int(res.get("memoryMB", 0), f"{field}.resourcePerInstance.memoryMB", 0)
        role_ports = want_dict(res.get("ports") or {}, f"{field}.resourcePerInstance.ports")
        # a label with 0 ports (the protocol's first draft's default) still gets one: commands use its list
        ports[str(rname)] = {str(k): max(1, want_int(v, f"{field}.resourcePerInstance.ports.{k}", 0))
                             for k, v in role_ports.items()}
        image_ref = role.get("dockerImage")
        if image_ref is None and not ignore_image:
            raise fail(f"{field}.dockerImage", f"name the dockerimage prerequisite this role runs in, {NO_IMAGE_HINT}")
        image = prereqs.get(str(image_ref)) if image_ref is not None else None
        if image_ref is not None and (image is None or image.get("type") != "dockerimage"):
            raise fail(f"{field}.dockerImage", f"{image_ref!r:.60} is not a dockerimage in prerequisites")
        if image is not None:
            images[str(rname)] = want_str(image.get("uri"), f"prerequisites.{image_ref}.uri")
        scope: dict[str, Any] = {"parameters": params}
        for kind in ("data", "script", "output"):
            ref = role.get(kind)
            if ref is not None:
                if str(ref) not in prereqs or prereqs[str(ref)].get("type") != kind:
                    raise fail(f"{field}.{kind}", f"{ref!r:.60} is not a {kind} in prerequisites")
                scope[kind] = prereqs[str(ref)]
        commands = role.get("commands")
        if commands is None:
            raise fail(f"{field}.commands", "give the commands this role runs")
        if isinstance(commands, str):
            commands = [commands]
        lines = list(role.get("_pre") or [])
        for hook_roles, hook in hooks.items():
            if hook_roles == "*" or str(rname) in hook_roles.split(","):
                lines += hook.get("pre", [])
        if deployment is not None:
            dep_role = (deployment.get("taskRoles") or {}).get(rname) or {}
            lines += [str(c) for c in dep_role.get("preCommands") or []]
        lines += [str(c) for c in want_list(commands, f"{field}.commands")]
        if deployment is not None:
            lines += [str(c) for c in ((deployment.get("taskRoles") or {}).get(rname) or {}).get("postCommands") or []]
        for hook_roles, hook in hooks.items():
            if hook_roles == "*" or str(rname) in hook_roles.split(","):
                lines += hook.get("post", [])
        lines += list(role.get("_post") or [])
        command = "\n".join(substitute(line, scope, secrets, f"{field}.commands") for line in lines)
        if not command.strip():
            raise fail(f"{field}.commands", "give at least one command")
        completion = want_dict(role.get("completion") or {}, f"{field}.completion")
        policy = {"min_failed": completion_count(completion.get("minFailedInstances", ABSENT),
                                                 f"{field}.completion.minFailedInstances", count, 1),
                  "min_succeeded": completion_count(completion.get("minSucceededInstances", ABSENT),
                                                    f"{field}.completion.minSucceededInstances", count, None)}
        retries[str(rname)] = want_int(role.get("taskRetryCount", 0) or 0, f"{field}.taskRetryCount", 0)
        opts = want_dict(role.get("extraContainerOptions") or {}, f"{field}.extraContainerOptions")
        for k in sorted(opts):
            notes.append(f"{field}.extraContainerOptions.{k}: not applied (the launcher's container defaults hold)")
        hive = hived.get(str(rname), {})
        if hive.get("sku_num") is not None and hive["sku_num"] != gpus:
            notes.append(f"extras.hivedScheduler.taskRoles.{rname}.skuNum: {hive['sku_num']} not applied; "
                         f"resourcePerInstance.gpu ({gpus}) GPUs per instance are used (a SKU here is one GPU)")
        tasks.append({"name": str(rname), "count": count, "gpus": gpus, "cpus": cpus, "memory_mb": memory,
                      "command": command, **policy,
                      **({"gpu_type": hive["gpu_type"]} if hive.get("gpu_type") else {})})
    if ignore_image:
        notes.append(image_not_applied("taskRoles.*.dockerImage", list(images.values())))
        images = {}
    if len(set(images.values())) > 1:
        first = next(iter(images))
        other = next(r for r in images if images[r] != images[first])
        raise fail(f"taskRoles.{other}.dockerImage", f"hive-lab runs a job's tasks in one image; {other} uses "
                                                     f"{images[other]!r} and {first} {images[first]!r}")
    job_retries = want_int(doc.get("jobRetryCount", 0) or 0, "jobRetryCount", -2)
    if job_retries < 0:  # OpenPAI's -1/-2: retry without limit
        notes.append(f"jobRetryCount: {job_retries} is retried at most 100 times here")
        job_retries = 100
    if any(retries.values()):
        notes.append("taskRoles.*.taskRetryCount: a failed task retries the whole job here (max_retries is the "
                     "largest of jobRetryCount and taskRetryCount)")
    max_retries = min(100, max([job_retries, *retries.values()]))
    request: dict[str, Any] = {
        "name": job_name(name), "tasks": tasks, "env": {"PAI_JOB_NAME": str(name)},
        **({"image": next(iter(images.values()))} if images else {}),
    }
    if doc.get("jobRetryCount") is not None or any(r.get("taskRetryCount") is not None for r in roles.values()
                                                   if isinstance(r, dict)):
        request["max_retries"] = max_retries  # else hive-lab's default (opportunistic jobs retry)
    vc = vc_from(defaults.get("virtualCluster"), "defaults.virtualCluster", notes)
    if vc:
        request["vc"] = vc
    if priority is not None:
        request["priority"] = priority
    if hived.get("*", {}).get("pinned_cell"):
        request["pinned_cell"] = hived["*"]["pinned_cell"]  # checked against the VC's pinned cells at submit
    secret_env = {f"PAI_SECRET_{k}": env_value(v) for k, v in secrets.items()}
    runtime: dict[str, Any] = {"platform": "openpai", "ports": ports}
    if extras.get("gangAllocation") is False:
        runtime.update(_without_gang(tasks, notes))
    return Translation(format="openpai-v2", request=request, original=masked(original_doc, set(secrets)),
                       not_applied=notes, runtime=runtime, secrets=secret_env)


def _without_gang(tasks: list[dict], notes: list[str]) -> dict[str, Any]:
    """``extras.gangAllocation: false``: OpenPAI starts the tasks as resources allow, not all at once. A
    role's instances become a job array here (one element per instance, released as they fit), and the
    role's completion counts end it: ``minFailedInstances`` failed elements cancel the rest (the job
    failed), ``minSucceededInstances`` succeeded ones too (the job succeeded). Returns the runtime fields
    (``array``, ``instances``, ``completion``) and changes the one task group to one task per element."""
    if len(tasks) != 1:
        notes.append("extras.gangAllocation: false is not applied to a job of several task roles: hive-lab "
                     "starts their tasks all together (a job of one role runs its instances as they fit)")
        return {}
    task = tasks[0]
    count = task["count"]
    if count == 1:
        return {}
    completion = {"min_failed": task.pop("min_failed", 1), "min_succeeded": task.pop("min_succeeded", None)}
    task["count"] = 1
    notes.append(f"extras.gangAllocation: false: the {count} instances of {task['name']} start as they fit, each "
                 f"its own job in an array (PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX is its index); the role's "
                 f"completion counts end the array")
    return {"array": f"0-{count - 1}", "instances": count, "completion": completion}
