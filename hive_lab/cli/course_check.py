"""``hive-lab course check``: what would break a term, read from the course's files under ``--root``.

The configs are read merged, as the Hub and the service read them (``hub_config.load``: each owned file
and the instructor's ``*_local.py`` it loads). Each finding is one sentence saying what to change and
where (the instructor's local file when the fix is theirs). Problems fail the check (exit 1); warnings
(homes others can read, ``/proc`` without ``hidepid``, accounts missing here, a node name that will
matter once NVML sees GPUs) are printed with their fix; notes say what could not be checked.

Known keys come from the code (the limits model, the traits of the service's classes), so settings
added there pass without a change here.
"""

from __future__ import annotations

import difflib
import json
import os
import pathlib
import socket
import stat
from dataclasses import dataclass, field, fields
from typing import Any

from . import hub_config, student_access
from .hub_config import config_value

SERVICE_FILE = "etc/hive-lab/hive_lab_config.py"
HUB_FILE = "etc/jupyterhub/jupyterhub_config.py"
SERVICE_LOCAL_FILE = "etc/hive-lab/hive_lab_local.py"
HUB_LOCAL_FILE = "etc/jupyterhub/jupyterhub_local.py"
KERNELS_DIR = "usr/local/share/jupyter/kernels"
PROFILE_FILE = "etc/profile.d/hive-lab.sh"
VENV_FIX = ("install hive-lab in a venv every account can read, e.g. `/usr/bin/python3 -m venv /opt/hive` "
            "(a pyenv or conda Python under /root does not do: the venv's python is a symlink into it), and run "
            "`/opt/hive/bin/hive-lab course init` from it")


@dataclass
class CourseReport:
    problems: list[str] = field(default_factory=list)  # the term breaks: exit 1
    warnings: list[str] = field(default_factory=list)  # works, but leaks or will break later: fix advised
    notes: list[str] = field(default_factory=list)  # what could not be checked here, and why


def check_course(root: pathlib.Path) -> list[str]:
    """The problems of the course under ``root`` (empty: none); ``course_report`` has the warnings too."""
    return course_report(root).problems


def _did_you_mean(word: str, known) -> str:
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _edit(root: pathlib.Path, local: str, owned: str) -> pathlib.Path:
    """The file where the instructor's fix goes: their local file when there is one."""
    return root / local if (root / local).is_file() else root / owned


@dataclass
class _Course:
    root: pathlib.Path
    hub: Any
    svc: Any
    cluster: Any  # hive_scheduler ClusterConfig, None when cluster_config is not valid

    @property
    def app(self):
        return self.svc.HiveLabApp

    @property
    def service_edit(self) -> pathlib.Path:
        return _edit(self.root, SERVICE_LOCAL_FILE, SERVICE_FILE)

    @property
    def hub_edit(self) -> pathlib.Path:
        return _edit(self.root, HUB_LOCAL_FILE, HUB_FILE)

    @property
    def groups(self) -> dict:
        return config_value(self.hub.JupyterHub, "load_groups", {}) or {}

    def users(self) -> list[str]:
        """The course's people: allowed users and the members of the Hub groups it loads."""
        names = set(config_value(self.hub.Authenticator, "allowed_users", set()) or ())
        for spec in self.groups.values():
            members = spec.get("users", []) if isinstance(spec, dict) else spec
            names.update(members or ())
        return sorted(str(n) for n in names)

    def isolates(self) -> bool:
        """Jobs run as their owners (the Hub runs the service as root; run_as "auto" then means "owner")."""
        return config_value(self.svc.Isolation, "run_as", "auto") in ("auto", "owner")

    def account_mapping(self) -> dict:
        return dict(config_value(self.svc.Isolation, "accounts", {}) or {})

    def jobs_root(self) -> str:
        configured = config_value(self.app, "jobs_root", "")
        if configured:
            return str(configured)
        from jupyter_core.paths import jupyter_data_dir

        return str(pathlib.Path(jupyter_data_dir()) / "hive_lab" / "jobs")


def course_report(root: pathlib.Path) -> CourseReport:
    report = CourseReport()
    root = pathlib.Path(root)
    for d in ("etc/hive-lab", "etc/jupyterhub"):
        if not (root / d).is_dir():
            report.problems.append(f"{root / d} does not exist: run `hive-lab course init` (it creates it)")
    if report.problems:
        return report
    hub_file, service_file = root / HUB_FILE, root / SERVICE_FILE
    report.problems += hub_config.check(hub_file)
    report.problems += hub_config.check_service(service_file)
    hub, _ = hub_config.load_checked(hub_file)
    svc, _ = hub_config.load_checked(service_file)
    if hub is None or svc is None:
        return report
    try:
        from hive_lab_server.cluster import resolve_cluster

        cluster = resolve_cluster(config_value(svc.HiveLabApp, "cluster_config", "default"), "none").config
    except Exception:  # check_service said why
        cluster = None
    course = _Course(root, hub, svc, cluster)
    for check in (_check_settings_names, _check_vc_access, _check_limits, _check_cells, _check_kernelspecs,
                  _check_profile, _check_nodes, _check_jobs_root_mode, _check_accounts, _check_student_paths,
                  _check_privacy, _check_gpu_driver):
        check(course, report)
    return report


# --- the service's settings ---------------------------------------------------------------------------


def _service_classes() -> dict[str, type]:
    """The service's configurable classes by section name (c.HiveLabApp, c.Isolation, the launchers)."""
    from hive_lab_server.app import HiveLabApp
    from hive_lab_server.execution.isolation import Isolation

    return {cls.__name__: cls for cls in (HiveLabApp, Isolation, *HiveLabApp.classes)
            if cls.__module__.startswith("hive_lab_server.")}


def _check_settings_names(course: _Course, report: CourseReport) -> None:
    """A misspelled setting (c.HiveLabApp.jobs_rot) is ignored with a log line nobody reads."""
    for section, cls in _service_classes().items():
        if section not in course.svc:
            continue
        known = set(cls.class_traits(config=True))
        for name in sorted(course.svc[section]):
            if name[:1].isupper() or name in known:
                continue
            report.problems.append(
                f"c.{section}.{name} is not a setting of hive-lab's {section}{_did_you_mean(name, known)}: fix it in "
                f"{course.service_edit} (`python -m hive_lab_server --help-all` lists them)")


def _check_vc_access(course: _Course, report: CourseReport) -> None:
    groups, users = course.groups, course.users()
    vc_access = config_value(course.app, "vc_access", {}) or {}
    explicit_users = bool(config_value(course.hub.Authenticator, "allowed_users", None)) and not config_value(
        course.hub.Authenticator, "allow_all", False)
    for key, vcs in vc_access.items():
        key = str(key)
        if not isinstance(vcs, (list, tuple, set, str)):
            report.problems.append(f"vc_access[{key!r}] must be a list of VC names, not {vcs!r}: fix it in "
                                   f"{course.service_edit}")
        if key == "*":
            continue
        if key.startswith("@"):
            if key[1:] not in groups:
                report.problems.append(
                    f"vc_access names Hub group {key[1:]!r}, which c.JupyterHub.load_groups does not create"
                    f"{_did_you_mean(key[1:], groups)}: add it (with its students) to load_groups in "
                    f"{course.hub_edit}, or fix the key in {course.service_edit}")
        elif key in groups and key not in users:
            report.problems.append(
                f"vc_access key {key!r} has no '@', so it names a user, but {key!r} is a Hub group "
                f"(c.JupyterHub.load_groups): its members get nothing; write '@{key}' in {course.service_edit}")
        elif explicit_users and key not in users:
            report.problems.append(
                f"vc_access names user {key!r}, who is not one of the course's users (c.Authenticator.allowed_users, "
                f"load_groups){_did_you_mean(key, users)}: fix the key in {course.service_edit} (a group is '@name')")


def _check_limits(course: _Course, report: CourseReport) -> None:
    """Unknown keys anywhere in user_limits (a misspelled max_priority is no limit at all), by name."""
    from hive_scheduler.limits import LimitsError, LimitTable, UserLimits

    from hive_lab_server.jobs.limits import parse_config

    limits = config_value(course.app, "user_limits", {}) or {}
    table_keys = [f.name for f in fields(LimitTable)]
    limit_keys = [f.name for f in fields(UserLimits)]
    where = course.service_edit
    found = False
    for vc, table in limits.items():
        if course.cluster is not None and vc not in course.cluster.virtual_clusters:
            continue  # parse_config below names it
        if not isinstance(table, dict):
            continue
        for key in table:
            if key not in table_keys:
                found = True
                report.problems.append(
                    f"user_limits[{vc!r}] has the unknown key {key!r}{_did_you_mean(key, table_keys)}; its keys are "
                    f"{', '.join(table_keys)}: fix it in {where}")
        rules = [("default", table.get("default"))]
        for part in ("groups", "users"):
            if isinstance(table.get(part), dict):
                rules += [(f"{part}.{name}", rule) for name, rule in table[part].items()]
        for name, rule in rules:
            for key in (rule if isinstance(rule, dict) else {}):
                if key not in limit_keys:
                    found = True
                    report.problems.append(
                        f"user_limits[{vc!r}].{name} has the unknown limit {key!r}{_did_you_mean(key, limit_keys)}, "
                        f"which limits nothing; the limits are {', '.join(limit_keys)}: fix it in {where}")
        for name in (table.get("groups") or {}) if isinstance(table.get("groups"), dict) else ():
            if name not in course.groups:
                report.warnings.append(
                    f"user_limits[{vc!r}] has limits for group {name!r}, which c.JupyterHub.load_groups does not create"
                    f"{_did_you_mean(name, course.groups)}: they apply to nobody unless the authenticator makes that "
                    f"group; fix the name in {where}")
    if found or course.cluster is None:
        return
    try:
        parse_config(limits, course.cluster.virtual_clusters)
    except LimitsError as exc:
        report.problems.append(f"{exc.message}: fix it in {where}")


LEVEL_NAMES = ["pair", "quad", "octet", "half16", "half32"]  # course init's cell levels (a test keeps them equal)


def levels_for(gpus_per_node: int) -> list[str]:
    """The cell levels ``course init`` writes for nodes of ``gpus_per_node`` GPUs (each splitting in two)."""
    if gpus_per_node < 2 or gpus_per_node & (gpus_per_node - 1):
        return []
    return LEVEL_NAMES[: gpus_per_node.bit_length() - 2]


def _check_cells(course: _Course, report: CourseReport) -> None:
    if course.cluster is None:
        return
    for vc, table in (config_value(course.app, "user_limits", {}) or {}).items():
        spec = course.cluster.virtual_clusters.get(vc)
        rules = (table or {}).values() if isinstance(table, dict) else ()
        try:
            want = max((int(rule.get("max_gpus") or 0) for rule in rules if isinstance(rule, dict)), default=0)
        except (TypeError, ValueError):
            continue  # _check_limits names it
        if spec is None or not want:
            continue
        biggest = max((course.cluster.cell_types[c.cell_type].leaf_count for c in spec.virtual_cells), default=0)
        if biggest < want:
            report.problems.append(
                f"user_limits lets a student of {vc} use {want} GPUs, but {vc}'s largest cell holds {biggest} GPU(s), "
                f"so a task of {want} GPUs can never run: give the cluster cell levels (e.g. \"levels\": "
                f"{levels_for(max(want, 4))!r} in cluster_config) or lower max_gpus in {course.service_edit}")


def _check_nodes(course: _Course, report: CourseReport) -> None:
    """The node that is this machine must carry its name, or the service schedules none of its GPUs."""
    if course.cluster is None:
        return
    from hive_lab_server.hardware.inventory import compare_with_config, detect_local_inventory

    backend = str(config_value(course.app, "nvml_backend", "auto"))
    nodes = sorted(course.cluster.nodes)
    fix = (f"name the node after this machine in cluster_config (short form: \"nodes\": [{{}}]) in "
           f"{course.service_edit}")
    try:
        local = detect_local_inventory(backend) if backend != "none" else None
    except Exception as exc:  # noqa: BLE001 - the instructor's backend setting: say what is wrong, never crash
        report.problems.append(f"nvml_backend {backend!r} cannot be read ({exc}): fix it in {course.service_edit}")
        return
    if local is not None:
        for line in compare_with_config(local, course.cluster):
            if local.node not in nodes:
                report.problems.append(f"{line}: {fix.format(repr(local.node))}")
            else:
                report.warnings.append(
                    f"{line}: make cluster_config say what this machine has, in {course.service_edit}")
        return
    here = socket.gethostname()
    if len(nodes) == 1 and nodes[0] != here and backend != "none":
        report.warnings.append(
            f"the cluster's one node is {nodes[0]!r} but this machine is {here!r}; NVML sees no GPU here now, but "
            f"once it does (nvml_backend {backend!r}) the service will not schedule them: {fix.format(repr(here))}")


# --- the kernelspecs, the jobs root, the accounts: what students need ------------------------------------


def _hive_kernelspecs(course: _Course, report: CourseReport) -> list[tuple[pathlib.Path, dict]]:
    out = []
    for spec_file in sorted((course.root / KERNELS_DIR).glob("*/kernel.json")):
        try:
            spec = json.loads(spec_file.read_text())
        except (OSError, ValueError) as exc:
            report.problems.append(f"{spec_file} cannot be read ({exc}): reinstall it (hive-lab course init)")
            continue
        prov = (spec.get("metadata") or {}).get("kernel_provisioner") or {}
        if prov.get("provisioner_name") == "hive":
            out.append((spec_file, spec))
    return out


def _check_kernelspecs(course: _Course, report: CourseReport) -> None:
    for spec_file, spec in _hive_kernelspecs(course, report):
        d = spec_file.parent
        if stat.S_IMODE(d.stat().st_mode) & 0o005 != 0o005 or stat.S_IMODE(spec_file.stat().st_mode) & 0o004 == 0:
            report.problems.append(f"students cannot read the kernelspec {d.name} ({d} must be 0755, its kernel.json "
                                   f"0644): chmod 755 {d}; chmod 644 {spec_file}")
        vc = ((spec["metadata"]["kernel_provisioner"].get("config")) or {}).get("vc")
        if vc and course.cluster is not None and vc not in course.cluster.virtual_clusters:
            report.problems.append(f"the kernelspec {d.name} asks for VC {vc!r}, which the cluster does not have: "
                                   f"reinstall it with --vc one of {sorted(course.cluster.virtual_clusters)}")


def _check_profile(course: _Course, report: CourseReport) -> None:
    profile = course.root / PROFILE_FILE
    if not profile.is_file():
        report.problems.append(f"{profile} is missing: students' terminals (login shells) will not find `hive-lab`; "
                               "run `hive-lab course init` or add its bin dir to PATH there")


def _check_jobs_root_mode(course: _Course, report: CourseReport) -> None:
    jobs_root = course.jobs_root()
    try:
        mode = stat.S_IMODE(os.stat(jobs_root).st_mode)
    except OSError:
        report.notes.append(f"the jobs root {jobs_root} does not exist yet (the service makes it at start, and stops "
                            "when its owners could not reach it)")
        return
    if course.isolates() and mode & 0o004:
        report.problems.append(f"the jobs root {jobs_root} is listable by others (mode {mode:04o}): every student "
                               f"could list classmates' job dirs; chmod 711 {jobs_root}")


def _needed_paths(course: _Course, report: CourseReport) -> list[student_access.Need]:
    """Every path a student's server, kernel or job needs, with what it is for and the fix."""
    needs = []
    for spec_file, spec in _hive_kernelspecs(course, report):
        python = (spec.get("argv") or [""])[0]
        if os.path.isabs(python):
            needs.append(student_access.Need(python, f"the Python of the kernelspec {spec_file.parent.name}", VENV_FIX))
    env = config_value(course.hub.Spawner, "environment", {})
    path_dirs = [d for d in str(env.get("PATH", "") if isinstance(env, dict) else "").split(":") if os.path.isabs(d)]
    spawn_fix = (f"their servers do not start (the Hub answers 500 at spawn); {VENV_FIX}, and set that PATH in "
                 f"{course.hub_edit}")
    for d in path_dirs:
        if not os.path.isdir(d):
            continue
        needs.append(student_access.Need(d, "a dir on their servers' PATH (c.Spawner.environment)", spawn_fix))
        for tool in ("jupyterhub-singleuser", "python"):
            exe = os.path.join(d, tool)
            if os.path.exists(exe):
                needs.append(student_access.Need(exe, f"{tool} on their servers' PATH", spawn_fix))
    if course.isolates() and config_value(course.app, "launcher", "auto") != "docker":  # docker mounts each job's dir
        jobs_root = course.jobs_root()
        if os.path.exists(jobs_root):
            needs.append(student_access.Need(jobs_root, "the jobs root (their jobs' working dirs are below it)",
                                             f"chmod o+x each dir on the way, or set c.HiveLabApp.jobs_root to "
                                             f"'/var/lib/hive-lab/jobs' (0711) in {course.service_edit}"))
    seen: dict[str, student_access.Need] = {}
    for need in needs:  # one sentence per path (the first purpose named), whatever else needs it
        seen.setdefault(os.path.realpath(need.path), need)
    return list(seen.values())


def _check_accounts(course: _Course, report: CourseReport) -> None:
    """The course's accounts as the service maps them: a system account's every job is refused (403)."""
    if not course.isolates():
        return
    from hive_lab_server.execution.isolation import AccountError, Isolation, resolve_account

    iso = course.svc.Isolation
    min_uid = config_value(iso, "min_uid", Isolation.min_uid.default_value)
    allow_root = config_value(iso, "allow_root", False)
    mapping = course.account_mapping()
    missing = []
    for user in course.users():
        pw = student_access.unix_account(user, mapping)
        if pw is None:
            missing.append(user)
            continue
        try:
            resolve_account(user, mapping, allow_root=allow_root, min_uid=min_uid)
        except AccountError:
            why = ("root" if pw.pw_uid == 0 else f"a system account (uid {pw.pw_uid}, below c.Isolation.min_uid = "
                   f"{min_uid})")
            report.problems.append(
                f"{user!r} runs jobs as the Unix account {pw.pw_name!r}, {why}: every job of theirs is refused (403); "
                f"give them an ordinary account (uid >= {min_uid}: userdel {pw.pw_name}; useradd -m {pw.pw_name}) "
                f"or, if that account is meant, map it in c.Isolation.accounts in {course.service_edit}")
    if missing:
        report.warnings.append(
            f"{', '.join(missing)} have no Unix account on this machine: the Hub cannot start their servers and their "
            f"jobs are refused (403) until they have one (useradd -m NAME), or map them in c.Isolation.accounts in "
            f"{course.service_edit}")


def _check_student_paths(course: _Course, report: CourseReport) -> None:
    needs = _needed_paths(course, report)
    mapping = course.account_mapping()
    accounts = [pw for pw in (student_access.unix_account(u, mapping) for u in course.users())
                if pw is not None and pw.pw_uid != 0]
    accounts = list({pw.pw_name: pw for pw in accounts}.values())
    if not needs:
        return
    if not accounts or not student_access.can_test_as_students():
        why = ("none of the course's users has a Unix account here" if not accounts else
               "testing as a student needs root and /usr/sbin/runuser")
        report.notes.append(f"the paths students need were not tested as a student ({why}): "
                            f"{', '.join(n.path for n in needs)}")
        return
    probe = sorted({p for n in needs for p in student_access.resolved(n.path)})
    by_path: dict[str, list[str]] = {}
    for pw in accounts:
        for path in student_access.blocked_as(pw.pw_name, probe):
            by_path.setdefault(path, []).append(pw.pw_name)
    for need in needs:
        who = sorted({name for p in student_access.resolved(need.path) for name in by_path.get(p, ())})
        if not who:
            continue
        real = os.path.realpath(need.path)
        where = f" (it resolves to {real})" if real != need.path else ""
        blocked = student_access.first_blocked_dir(who[0], need.path)
        because = f"; {blocked} is not searchable by them" if blocked else ""
        report.problems.append(f"{', '.join(who)} cannot reach {need.path}, {need.what}{where}{because}: {need.fix}")


def _check_privacy(course: _Course, report: CourseReport) -> None:
    """What lets one student read another's work: warnings with the fix (the term runs, but leaks)."""
    mapping = course.account_mapping()
    accounts = [pw for pw in (student_access.unix_account(u, mapping) for u in course.users()) if pw is not None]
    exposed = student_access.exposed_homes(accounts)
    if exposed:
        homes = " ".join(h.split(" (")[0] for h in exposed)
        report.warnings.append(f"homes other accounts may read or enter: {', '.join(exposed)}; classmates can copy "
                               f"homework from them: chmod 700 {homes}")
    try:
        mounts = pathlib.Path("/proc/self/mounts").read_text()
    except OSError:
        return
    if not student_access.proc_hides_pids(mounts):
        report.warnings.append("/proc is mounted without hidepid: every student sees every process's command line "
                               f"(classmates' arguments, paths, tokens passed on the command line): "
                               f"{student_access.PROC_FIX}")


def _check_gpu_driver(course: _Course, report: CourseReport) -> None:
    """GPUs only through jobs needs the NVIDIA driver to keep its nodes locked (the service refuses to start
    otherwise): said here, before the term, with the same sentence."""
    from hive_lab_server.execution.isolation import Isolation
    from hive_lab_server.execution.isolation.gpu_access import driver_reopens_nodes

    iso = course.svc.Isolation if "Isolation" in course.svc else {}
    if not course.isolates() or not config_value(iso, "lock_gpu_devices", True):
        return
    docker = config_value(course.app, "launcher", "auto") == "docker"
    params = config_value(iso, "nvidia_params_file", Isolation.nvidia_params_file.default_value)
    gid = 0
    if docker:
        from hive_lab_server.execution.isolation.gpu_access import gpu_group_gid

        gid = gpu_group_gid(config_value(iso, "gpu_group", Isolation.gpu_group.default_value))
        if gid is None:
            return  # the group is made at the service's first start; its check then says what to set
    why = driver_reopens_nodes(params, gid, 0o660 if docker else 0o600)
    if why:
        report.problems.append(f"the service will not start: {why}")
