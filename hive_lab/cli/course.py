"""``hive-lab course init|check``: a course on JupyterHub set up in one step, and checked.

``init`` writes, under ``--root`` (default ``/``), everything a course needs and nothing else:

- ``/etc/hive-lab/hive_lab_config.py`` (0600, init's): the service's settings (``hub-config
  --service-config``'s form): a cluster on this machine (``--node``, default its host name, so the
  service finds its GPUs there; its CPUs and memory) whose nodes are split into cells of 2, 4, ... GPUs
  (``levels``), so that a task of the per-student limit fits the course's VC; the VC; Hub groups -> VC;
  per-student limits; time limits; and a class's safe defaults, each with its option: students'
  ``max_priority`` 0 (no student preempts a classmate; the instructors' group may), ``max_queued_jobs``,
  ``Isolation.pids_max``, ``kernel_limits`` (every GPU kernel's idle cap and time limit, whatever its
  kernelspec says); with ``--simulate-gpus N``, the fake NVML backend (``course_machine``);
- ``/etc/jupyterhub/jupyterhub_config.py`` (0600, init's): ``hub-config``'s fragment (the service,
  instructors' role) and the course's users: ``allowed_users`` (JupyterHub >= 5 lets nobody in without
  it), the Hub groups (students, instructors);
- ``hive_lab_local.py`` and ``jupyterhub_local.py`` next to them (0600, the instructor's): created once,
  never rewritten, loaded last by init's files (``course_files``);
- ``/var/lib/hive-lab`` (its store), ``/var/lib/hive-lab/jobs`` (0711: jobs run as their owners) and
  ``/var/lib/jupyterhub`` (0700: the Hub's database and cookie secret);
- the course's GPU kernelspec in ``/usr/local/share/jupyter/kernels/<course>-gpu`` (0755/0644: students see it);
- ``/etc/profile.d/hive-lab.sh``: ``hive-lab`` on the PATH of students' terminals (login shells reset it).

Paths inside the files are under ``--root`` too (a test root is used in place). Running it again
rewrites init's files and prints each line it changed; lines the instructor added or changed in them
by hand are moved to the local files, never dropped; a file of the same name that it did not write is
left alone and named (exit 1). ``check`` reads what is there and says, one sentence each, what to change.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import stat
import sys
from typing import Any

from . import course_files, course_machine, hub_config
from .course_machine import SIMULATED_FILE

MARK = course_files.MARK
SERVICE_FILE = "etc/hive-lab/hive_lab_config.py"
SERVICE_LOCAL = "etc/hive-lab/hive_lab_local.py"  # the instructor's: created once, never rewritten
HUB_FILE = "etc/jupyterhub/jupyterhub_config.py"
HUB_LOCAL = "etc/jupyterhub/jupyterhub_local.py"  # the instructor's: created once, never rewritten
STATE_DIR = "var/lib/hive-lab"
HUB_STATE_DIR = "var/lib/jupyterhub"
KERNELS_DIR = "usr/local/share/jupyter/kernels"
PROFILE_FILE = "etc/profile.d/hive-lab.sh"
LEVEL_NAMES = ["pair", "quad", "octet", "half16", "half32"]


def levels_for(gpus_per_node: int) -> list[str]:
    """Cell levels between GPU and node, each splitting in two: 4 GPUs -> [pair], 8 -> [pair, quad]."""
    if gpus_per_node < 2 or gpus_per_node & (gpus_per_node - 1):
        return []  # not a power of two: no even split (the check says what a task can get)
    return LEVEL_NAMES[: int(math.log2(gpus_per_node)) - 1]


def _users(text: str | None) -> list[str]:
    return sorted({u.strip() for u in (text or "").split(",") if u.strip()})


def service_text(args: argparse.Namespace, root: pathlib.Path) -> tuple[str, str]:
    """The service's settings: (mark line, body). Safe for a class by default: students cannot outrank
    each other (``max_priority``), queue without bound (``max_queued_jobs``), fork without bound
    (``pids_max``) or keep GPU kernels idle or running past the course's caps (``kernel_limits``)."""
    per_node = args.gpus_per_node or args.gpus
    cluster = {"nodes": args.node, "gpus_per_node": per_node, "gpu_type": args.gpu_type,
               "levels": levels_for(per_node), "cpus_per_node": args.cpus_per_node}
    if args.memory_mb_per_node:
        cluster["memory_mb_per_node"] = args.memory_mb_per_node
    cluster["vcs"] = {args.name: args.gpus}
    students = {"max_gpus": args.max_gpus, "max_kernels": args.max_kernels, "max_priority": args.max_priority,
                "max_queued_jobs": args.max_queued_jobs}
    instructors = {"max_priority": args.instructors_max_priority, "max_gpus": args.gpus}
    limits = {args.name: {"default": students, "groups": {args.instructors_group: instructors}}}
    time_limits = {args.name: {"default_s": args.time_limit, "max_s": args.max_time_limit}}
    kernel_caps = {"max_time_limit_s": args.max_time_limit}
    if args.idle_timeout:
        kernel_caps["max_idle_s"] = args.idle_timeout
    state = root / STATE_DIR
    access = {"@" + args.students_group: [args.name], "@" + args.instructors_group: [args.name]}
    lines = [
        f"c.HiveLabApp.cluster_config = {cluster!r}",
        f"c.HiveLabApp.launcher = {args.launcher!r}",
        f'c.HiveLabApp.db_url = "sqlite:///{state}/hive_lab.sqlite"',
        f'c.HiveLabApp.jobs_root = "{state}/jobs"',
        f"c.HiveLabApp.vc_access = {access!r}   # Hub group -> VC",
        f"# per student (default) and for the instructors' group: a student's jobs ask for priority <= "
        f"{args.max_priority}, so none preempts a classmate's; instructors' may (hive-lab admin limits {args.name} --set ...)",
        f"c.HiveLabApp.user_limits = {limits!r}",
        f"c.HiveLabApp.vc_time_limits = {time_limits!r}   # seconds: a batch job's default and maximum",
        f"# every GPU kernel of the course, whatever its kernelspec says (a student may write her own): culled "
        f"after max_idle_s without execution, stopped at max_time_limit_s",
        f"c.HiveLabApp.kernel_limits = {{{args.name!r}: {kernel_caps!r}}}",
        f"c.Isolation.pids_max = {args.pids_max}   # processes per task (cgroup pids.max): a fork bomb stops there",
    ]
    if args.simulate_gpus:
        lines += [
            f"# --simulate-gpus {args.simulate_gpus}: this machine's GPUs are simulated (fake NVML); the device "
            f"nodes below are what isolation locks and masks",
            f'c.HiveLabApp.nvml_backend = "fake:{root / SIMULATED_FILE}"',
        ]
        if root != pathlib.Path("/"):
            lines.append(f'c.Isolation.gpu_device_glob = "{root}/dev/nvidia[0-9]*"')
    head = MARK + f" for course {args.name}: the hive-lab service's settings (c.HiveLabApp; docs/jupyterhub.md)"
    return head, "\n".join(lines) + "\n"


def hub_text(args: argparse.Namespace, root: pathlib.Path) -> tuple[str, str]:
    students, instructors = _users(args.students), _users(args.instructors)
    groups = {args.students_group: {"users": students}, args.instructors_group: {"users": instructors}}
    frag = hub_config.fragment(port=args.port, config=str(root / SERVICE_FILE), admin_groups=[args.instructors_group])
    allowed = (["c.Authenticator.allow_all = True   # every account of the authenticator may log in"]
               if args.allow_all else
               [f"c.Authenticator.allowed_users = {{{', '.join(map(repr, sorted(set(students) | set(instructors))))}}}"
                "   # JupyterHub >= 5: "
                "nobody else logs in"])
    head = MARK + f" for course {args.name} (JupyterHub >= 5; docs/jupyterhub.md)"
    return head, "\n".join([
        "c = get_config()  # noqa",
        "",
        frag.rstrip("\n"),
        "",
        "# the course's people: Hub groups decide the VC (students) and who administers hive-lab (instructors)",
        *allowed,
        f"c.JupyterHub.load_groups = {groups!r}",
        f'c.JupyterHub.db_url = "sqlite:///{root / HUB_STATE_DIR}/jupyterhub.sqlite"',
        f'c.JupyterHub.cookie_secret_file = "{root / HUB_STATE_DIR}/jupyterhub_cookie_secret"',
        f"c.Spawner.environment.update({{\"PATH\": {os.path.dirname(sys.executable) + ':/usr/local/bin:/usr/bin:/bin'!r}}})",
        "c.Spawner.default_url = \"/lab\"",
        "",
    ])


def kernel_text(args: argparse.Namespace) -> str:
    from .kernelspec import kernel_json

    spec = kernel_json(argparse.Namespace(
        gpus=args.kernel_gpus, gpu_type=None, vc=args.name, image=None, idle_timeout=args.idle_timeout, cpus=0,
        memory_mb=0, display_name=f"Python 3 ({args.name}, {args.kernel_gpus:g} GPU)", time_limit=None))
    spec["metadata"]["hive_lab_course"] = args.name  # how init knows it wrote this file
    return json.dumps(spec, indent=1) + "\n"


def profile_text() -> str:
    return (f"{MARK}: hive-lab on the PATH of login shells (JupyterLab's terminals)\n"
            f'case ":$PATH:" in *":{os.path.dirname(sys.executable)}:"*) ;; '
            f'*) PATH="{os.path.dirname(sys.executable)}:$PATH" ;; esac\n')


def _write(path: pathlib.Path, text: str, mode: int, mark: str = MARK) -> list[str]:
    """Write ``text`` (created with ``mode``); a file there that init did not write is left alone. The
    sentences saying what changed (a file students read: nobody's edits live in it)."""
    old = None
    if path.exists():
        old = path.read_text(errors="replace")
        if mark not in old:
            raise FileExistsError(f"{path} exists and was not written by `hive-lab course init`: move it away "
                                  f"(or merge the printed text into it by hand) and run again")
        if old == text and stat.S_IMODE(path.stat().st_mode) == mode:
            return [f"unchanged: {path}"]
    course_files.write_private(path, text, mode)
    if old is None:
        return [f"created: {path} ({mode:04o})"]
    before, after = old.splitlines(), text.splitlines()
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    return [f"updated: {path} ({mode:04o}, -{len(removed)} +{len(added)} line(s))",
            *[f"  - {line.strip()}" for line in removed], *[f"  + {line.strip()}" for line in added]]


def _dir(path: pathlib.Path, mode: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)


def _refusal(args: argparse.Namespace) -> str | None:
    """Why these options cannot make a course (a sentence saying what to change), or None."""
    if not args.allow_all and not _users(args.students):
        return "name the students (--students ann,bob) or let every account in (--allow-all)"
    if not args.gpus:
        return "say how many GPUs the course has (--gpus N), or simulate them on this machine (--simulate-gpus N)"
    if args.max_gpus > args.gpus:
        return f"--max-gpus {args.max_gpus} is more than the course's {args.gpus} GPUs"
    per_node = args.gpus_per_node or args.gpus
    nodes = max(1, math.ceil(args.gpus / per_node))
    if len(args.node) != nodes:
        return (f"the course's {args.gpus} GPUs at {per_node} per machine need {nodes} machines: name each with "
                f"--node (e.g. --node {','.join(f'gpu{i}' for i in range(nodes))}; their host names, as the "
                f"service calls them)")
    if args.simulate_gpus and (nodes > 1 or args.gpus > args.simulate_gpus):
        return (f"--simulate-gpus {args.simulate_gpus} simulates GPUs on this one machine: give --gpus at most "
                f"{args.simulate_gpus} and no --gpus-per-node below it")
    return None


def init(args: argparse.Namespace) -> int:
    root = pathlib.Path(args.root)
    refusal = _refusal(args)
    if refusal:
        print(f"hive-lab course init: {refusal}", file=sys.stderr)
        return 2
    for d in ("etc/hive-lab", "etc/jupyterhub", "etc/profile.d", "var/lib/hive-lab", KERNELS_DIR):
        _dir(root / d, 0o755)
    _dir(root / HUB_STATE_DIR, 0o700)  # the Hub's database and cookie secret
    _dir(root / STATE_DIR / "jobs", 0o711)  # the jobs' owners traverse it to their own dirs
    _dir(root / KERNELS_DIR / f"{args.name}-gpu", 0o755)
    owned = [  # (file init owns, the instructor's file it loads last, an example line for that file)
        (root / SERVICE_FILE, root / SERVICE_LOCAL, service_text(args, root), 'c.HiveLabApp.nvml_backend = "none"'),
        (root / HUB_FILE, root / HUB_LOCAL, hub_text(args, root), "c.JupyterHub.port = 8000"),
    ]
    report: list[str] = []
    try:
        for path, local, (head, body), example in owned:
            report += course_files.ensure_local(local, path, example)
            report += course_files.update_owned(path, head, body, local)
        report += _write(root / KERNELS_DIR / f"{args.name}-gpu" / "kernel.json", kernel_text(args), 0o644,
                         '"hive_lab_course"')
        report += _write(root / PROFILE_FILE, profile_text(), 0o644)
        if args.simulate_gpus:
            desc = course_machine.simulated_hardware(args.node[0], args.simulate_gpus, args.gpu_type,
                                                     args.cpus_per_node, args.memory_mb_per_node)
            report += _write(root / SIMULATED_FILE, course_machine.simulated_text(desc), 0o644, '"simulated"')
            report += course_machine.make_device_nodes(root / "dev", args.simulate_gpus)
    except FileExistsError as exc:
        for line in report:
            print(line)
        print(f"hive-lab course init: {exc}", file=sys.stderr)
        return 1
    for line in report:
        print(line)
    problems = check_course(root)
    for line in problems:
        print(f"- {line}", file=sys.stderr)
    if problems:
        return 1
    if args.simulate_gpus:
        print(f"simulated: {args.simulate_gpus} {args.gpu_type} GPU(s) on {args.node[0]} (fake NVML, {root / SIMULATED_FILE}); "
              "jobs and kernels get GPU numbers as on a GPU machine, no real GPU. Device nodes in /dev are gone "
              "after a reboot: run `course init` again then")
    print(f"course {args.name} is set up: start the Hub with  jupyterhub -f {root / HUB_FILE}")
    print(f"your own settings go in {root / SERVICE_LOCAL} and {root / HUB_LOCAL} (course init never rewrites them)")
    return 0


# --- checking (hive_lab/cli/course_check.py) ------------------------------------------------------------

# init ends with check_course (callers import it from here too); `course check` prints the whole report
from .course_check import check_course, course_report  # noqa: E402,F401


def check(args: argparse.Namespace) -> int:
    root = pathlib.Path(args.root)
    report = course_report(root)
    for line in report.notes:
        print(f"note: {line}", file=sys.stderr)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in report.problems:
        print(f"- {line}", file=sys.stderr)
    if report.problems:
        print(f"{len(report.problems)} problem(s) in the course set up under {root}", file=sys.stderr)
        return 1
    print(f"the course under {root} is consistent: Hub config, service settings, kernelspecs, the paths and "
          f"accounts students need agree" + (f" ({len(report.warnings)} warning(s) above)" if report.warnings else ""))
    return 0


def _duration(text: str) -> float:
    from ..durations import parse_duration
    from ..errors import BadRequest

    try:
        return parse_duration(text)
    except BadRequest as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers) -> None:
    parser = subparsers.add_parser("course", help="set up (init) or check a course on JupyterHub in one step")
    sub = parser.add_subparsers(dest="course_command", metavar="ACTION", required=True)
    p = sub.add_parser("init", help="write the Hub config, the service's settings, the course kernelspec and dirs")
    p.add_argument("--name", required=True, help="the course: its VC, kernelspec <name>-gpu and (default) Hub group")
    p.add_argument("--gpus", type=int, default=None,
                   help="GPUs the course's VC guarantees (default: --simulate-gpus's number)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per machine (default: all on one)")
    p.add_argument("--gpu-type", default="GPU", help="GPU type name (default GPU)")
    p.add_argument("--node", type=_names, default=None, metavar="NAME[,NAME...]",
                   help="the machines' host names, as the service calls them (default: this machine's, "
                        f"{course_machine.hostname()}); one per machine of the course")
    p.add_argument("--cpus-per-node", type=_positive, default=None,
                   help=f"CPUs per machine (default: this machine's, {course_machine.cpus()})")
    p.add_argument("--memory-mb-per-node", type=_positive, default=None,
                   help="memory per machine in MB (default: this machine's, from /proc/meminfo)")
    p.add_argument("--simulate-gpus", type=_positive, default=0, metavar="N",
                   help="try the course on a machine without GPUs: N simulated GPUs (fake NVML) and their "
                        "device nodes /dev/nvidia0.. for isolation (root)")
    p.add_argument("--students", default="", help="students' accounts, comma-separated (they may log in)")
    p.add_argument("--students-group", default=None, help="Hub group of the students (default: --name)")
    p.add_argument("--instructors", default="", help="instructors' accounts, comma-separated")
    p.add_argument("--instructors-group", default="instructors", help="Hub group administering hive-lab")
    p.add_argument("--allow-all", action="store_true", help="let every account of the authenticator log in")
    p.add_argument("--max-gpus", type=int, default=2, help="GPUs a student may hold at once (default 2)")
    p.add_argument("--max-kernels", type=int, default=1, help="GPU kernels a student may hold at once (default 1)")
    p.add_argument("--max-priority", type=_whole, default=0,
                   help="highest priority a student's job may ask for (default 0, everyone's default: no "
                        "student's job preempts a classmate's)")
    p.add_argument("--instructors-max-priority", type=_whole, default=1000,
                   help="highest priority the instructors' jobs may ask for (default 1000: theirs preempt)")
    p.add_argument("--max-queued-jobs", type=_whole, default=10,
                   help="jobs a student may have waiting at once (default 10; more are refused, 429)")
    p.add_argument("--pids-max", type=_whole, default=512,
                   help="processes one task may have (cgroup pids.max; default 512; 0 = no limit)")
    p.add_argument("--kernel-gpus", type=float, default=1, help="GPUs of the course kernel (default 1)")
    p.add_argument("--time-limit", type=_duration, default=4 * 3600.0, help="a batch job's default time limit (4h)")
    p.add_argument("--max-time-limit", type=_duration, default=12 * 3600.0,
                   help="the longest a batch job may ask, and every GPU kernel's time limit (12h)")
    p.add_argument("--idle-timeout", type=_duration, default=1800.0,
                   help="idle GPU kernels are culled after (30m), whatever their kernelspec says")
    p.add_argument("--launcher", default="local", choices=["local", "docker", "slurm"])
    p.add_argument("--port", type=int, default=10101, help="port of the hive-lab service (default 10101)")
    p.add_argument("--root", default="/", help="write under this directory instead of / (to try it out)")
    p.set_defaults(func=lambda a: init(_defaults(a)))
    c = sub.add_parser("check", help="say what is inconsistent in a course's set-up, and what to change")
    c.add_argument("--root", default="/", help="the directory init wrote under (default /)")
    c.set_defaults(func=check)


def _defaults(args: argparse.Namespace) -> argparse.Namespace:
    """What the options leave open, read from the machine: its host name, CPUs and memory."""
    args.students_group = args.students_group or args.name
    if args.time_limit > args.max_time_limit:
        args.max_time_limit = args.time_limit
    if args.gpus is None:
        args.gpus = args.simulate_gpus or 0
    per_node = args.gpus_per_node or args.gpus or 1
    if args.node is None:  # one machine: this one; several: the instructor names them (refused otherwise)
        nodes = max(1, math.ceil((args.gpus or 1) / per_node))
        args.node = [course_machine.hostname()] if nodes == 1 else []
    args.cpus_per_node = args.cpus_per_node or course_machine.cpus()
    args.memory_mb_per_node = args.memory_mb_per_node or course_machine.memory_mb()
    return args


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give the machines' host names, comma-separated")
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a whole number above 0, got {text!r}")
    return value


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a whole number >= 0, got {text!r}")
    return value
