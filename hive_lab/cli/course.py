"""``hive-lab course init|check``: a course on JupyterHub set up in one step, and checked.

``init`` writes, under ``--root`` (default ``/``), everything a course needs and nothing else:

- ``/etc/hive-lab/hive_lab_config.py`` (0600): the service's settings (``hub-config --service-config``'s
  form): a cluster whose nodes are split into cells of 2, 4, ... GPUs (``levels``), so that a task of
  the per-student limit fits the course's VC; the VC; Hub group -> VC; per-student limits; time limits;
- ``/etc/jupyterhub/jupyterhub_config.py`` (0600): ``hub-config``'s fragment (the service, instructors'
  role) and the course's users: ``allowed_users`` (JupyterHub >= 5 lets nobody in without it), the Hub
  groups (students, instructors);
- ``/var/lib/hive-lab`` (its store), ``/var/lib/hive-lab/jobs`` (0711: jobs run as their owners) and
  ``/var/lib/jupyterhub`` (0700: the Hub's database and cookie secret);
- the course's GPU kernelspec in ``/usr/local/share/jupyter/kernels/<course>-gpu`` (0755/0644: students see it);
- ``/etc/profile.d/hive-lab.sh``: ``hive-lab`` on the PATH of students' terminals (login shells reset it).

Paths inside the files are under ``--root`` too (a test root is used in place). Files it wrote before
are rewritten (running it again changes nothing, or applies new options); a file
of the same name that it did not write is left alone and named (exit 1). ``check`` reads what is
there and says, one sentence each, what to change.
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

from . import hub_config

MARK = "# written by `hive-lab course init`"
SERVICE_FILE = "etc/hive-lab/hive_lab_config.py"
HUB_FILE = "etc/jupyterhub/jupyterhub_config.py"
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


def service_text(args: argparse.Namespace, root: pathlib.Path) -> str:
    per_node = args.gpus_per_node or args.gpus
    nodes = max(1, math.ceil(args.gpus / per_node))
    cluster = {"nodes": nodes, "gpus_per_node": per_node, "gpu_type": args.gpu_type,
               "levels": levels_for(per_node), "vcs": {args.name: args.gpus}}
    limits = {args.name: {"default": {"max_gpus": args.max_gpus, "max_kernels": args.max_kernels}}}
    time_limits = {args.name: {"default_s": args.time_limit, "max_s": args.max_time_limit}}
    state = root / STATE_DIR
    lines = [
        MARK + f" for course {args.name}: the hive-lab service's settings (c.HiveLabApp; docs/jupyterhub.md)",
        f"c.HiveLabApp.cluster_config = {cluster!r}",
        f"c.HiveLabApp.launcher = {args.launcher!r}",
        f'c.HiveLabApp.db_url = "sqlite:///{state}/hive_lab.sqlite"',
        f'c.HiveLabApp.jobs_root = "{state}/jobs"',
        f"c.HiveLabApp.vc_access = {{{'@' + args.students_group!r}: [{args.name!r}]}}   # Hub group -> VC",
        f"c.HiveLabApp.user_limits = {limits!r}   # per student (hive-lab admin limits {args.name} --set ...)",
        f"c.HiveLabApp.vc_time_limits = {time_limits!r}   # seconds: a batch job's default and maximum",
    ]
    return "\n".join(lines) + "\n"


def hub_text(args: argparse.Namespace, root: pathlib.Path) -> str:
    students, instructors = _users(args.students), _users(args.instructors)
    groups = {args.students_group: {"users": students}, args.instructors_group: {"users": instructors}}
    frag = hub_config.fragment(port=args.port, config=str(root / SERVICE_FILE), admin_groups=[args.instructors_group])
    allowed = (["c.Authenticator.allow_all = True   # every account of the authenticator may log in"]
               if args.allow_all else
               [f"c.Authenticator.allowed_users = {{{', '.join(map(repr, sorted(set(students) | set(instructors))))}}}"
                "   # JupyterHub >= 5: "
                "nobody else logs in"])
    return "\n".join([
        MARK + f" for course {args.name} (JupyterHub >= 5; docs/jupyterhub.md)",
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


def _write(path: pathlib.Path, text: str, mode: int, mark: str = MARK) -> str:
    """Write ``text`` (created with ``mode``); a file there that init did not write is left alone."""
    if path.exists():
        old = path.read_text(errors="replace")
        if mark not in old:
            raise FileExistsError(f"{path} exists and was not written by `hive-lab course init`: move it away "
                                  f"(or merge the printed text into it by hand) and run again")
        if old == text and stat.S_IMODE(path.stat().st_mode) == mode:
            return "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    return "written"


def _dir(path: pathlib.Path, mode: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)


def init(args: argparse.Namespace) -> int:
    root = pathlib.Path(args.root)
    if not args.allow_all and not _users(args.students):
        print("hive-lab course init: name the students (--students ann,bob) or let every account in (--allow-all)",
              file=sys.stderr)
        return 2
    if args.max_gpus > args.gpus:
        print(f"hive-lab course init: --max-gpus {args.max_gpus} is more than the course's {args.gpus} GPUs",
              file=sys.stderr)
        return 2
    for d in ("etc/hive-lab", "etc/jupyterhub", "etc/profile.d", "var/lib/hive-lab", KERNELS_DIR):
        _dir(root / d, 0o755)
    _dir(root / HUB_STATE_DIR, 0o700)  # the Hub's database and cookie secret
    _dir(root / STATE_DIR / "jobs", 0o711)  # the jobs' owners traverse it to their own dirs
    files = [
        (root / SERVICE_FILE, service_text(args, root), 0o600),
        (root / HUB_FILE, hub_text(args, root), 0o600),
        (root / KERNELS_DIR / f"{args.name}-gpu" / "kernel.json", kernel_text(args), 0o644),
        (root / PROFILE_FILE, profile_text(), 0o644),
    ]
    marks = {".json": '"hive_lab_course"'}
    _dir(root / KERNELS_DIR / f"{args.name}-gpu", 0o755)
    try:
        for path, text, mode in files:
            print(f"{_write(path, text, mode, marks.get(path.suffix, MARK))}: {path} ({mode:04o})")
    except FileExistsError as exc:
        print(f"hive-lab course init: {exc}", file=sys.stderr)
        return 1
    problems = check_course(root)
    for line in problems:
        print(f"- {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"course {args.name} is set up: start the Hub with  jupyterhub -f {root / HUB_FILE}")
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
    p.add_argument("--gpus", type=int, required=True, help="GPUs the course's VC guarantees")
    p.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per machine (default: all on one)")
    p.add_argument("--gpu-type", default="GPU", help="GPU type name (default GPU)")
    p.add_argument("--students", default="", help="students' accounts, comma-separated (they may log in)")
    p.add_argument("--students-group", default=None, help="Hub group of the students (default: --name)")
    p.add_argument("--instructors", default="", help="instructors' accounts, comma-separated")
    p.add_argument("--instructors-group", default="instructors", help="Hub group administering hive-lab")
    p.add_argument("--allow-all", action="store_true", help="let every account of the authenticator log in")
    p.add_argument("--max-gpus", type=int, default=2, help="GPUs a student may hold at once (default 2)")
    p.add_argument("--max-kernels", type=int, default=1, help="GPU kernels a student may hold at once (default 1)")
    p.add_argument("--kernel-gpus", type=float, default=1, help="GPUs of the course kernel (default 1)")
    p.add_argument("--time-limit", type=_duration, default=4 * 3600.0, help="a batch job's default time limit (4h)")
    p.add_argument("--max-time-limit", type=_duration, default=12 * 3600.0, help="the longest one may ask (12h)")
    p.add_argument("--idle-timeout", type=_duration, default=1800.0, help="idle GPU kernels are culled after (30m)")
    p.add_argument("--launcher", default="local", choices=["local", "docker", "slurm"])
    p.add_argument("--port", type=int, default=10101, help="port of the hive-lab service (default 10101)")
    p.add_argument("--root", default="/", help="write under this directory instead of / (to try it out)")
    p.set_defaults(func=lambda a: init(_defaults(a)))
    c = sub.add_parser("check", help="say what is inconsistent in a course's set-up, and what to change")
    c.add_argument("--root", default="/", help="the directory init wrote under (default /)")
    c.set_defaults(func=check)


def _defaults(args: argparse.Namespace) -> argparse.Namespace:
    args.students_group = args.students_group or args.name
    if args.time_limit > args.max_time_limit:
        args.max_time_limit = args.time_limit
    return args
