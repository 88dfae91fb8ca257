"""``hive-lab schedules [list|add|show|pause|resume|delete]``: recurring jobs (docs/schedules.md).

    hive-lab schedules                                   # yours: next run, last run
    hive-lab schedules add --cron '0 2 * * *' --timezone Europe/Berlin --name grade --gpus 1 --file grade.py -- python grade.py
    hive-lab schedules add --cron @hourly job.yaml --policy queue_one
    hive-lab schedules pause s-000003 ; hive-lab schedules resume s-000003 ; hive-lab schedules delete s-000003
"""

from __future__ import annotations

import os
import re
import shlex

from ..errors import BadRequest
from ._common import add_server_args, client_from, print_json, reports_errors

POLICIES = ("skip", "queue_one", "run_all")


def register(subparsers) -> None:
    p = subparsers.add_parser("schedules", help="recurring jobs: list, add, show, pause, resume, delete",
                              description="Recurring jobs: a job submitted as you at each time a cron expression "
                                          "names in a time zone (docs/schedules.md).")
    add_server_args(p)
    p.add_argument("--user", help="admins: list this user's (comma-separated names)")
    p.set_defaults(func=run_list)
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    ls = sub.add_parser("list", help="your schedules (admins: everyone's) with next run and last run")
    ls.add_argument("--user", help="admins: only these users' (comma-separated)")
    add_server_args(ls)
    ls.set_defaults(func=run_list)
    add = sub.add_parser("add", help="add a schedule: --cron, then a spec file and/or flags and the command")
    add.add_argument("words", nargs="*", metavar="[SPEC] [-- COMMAND ...]",
                     help="a YAML/JSON job spec (hive-lab's form), then the command after --")
    add.add_argument("--cron", required=True, help="five fields (minute hour day month weekday), or @hourly, "
                                                   "@daily, @weekly, @monthly, @yearly")
    add.add_argument("--timezone", "--tz", default="UTC", help="IANA time zone, e.g. Europe/Berlin (default UTC)")
    add.add_argument("--policy", choices=POLICIES, default="skip",
                     help="a run still going or runs missed: skip (default), queue_one, run_all")
    add.add_argument("--name", help="the schedule's name (its jobs' name too); a schedule of yours with this name is "
                                    "replaced (default: the job's name, else the script's, e.g. grade for grade.py)")
    add.add_argument("--file", action="append", default=[], metavar="PATH",
                     help="stage a text file (or glob, or directory) with each run, e.g. the script the command "
                          "runs (each run starts in its own new directory); repeatable")
    add.add_argument("--vc")
    add.add_argument("--gpus", type=float, help="GPUs of the job's task")
    add.add_argument("-c", "--command", help="shell command (or give it after --)")
    add.add_argument("--paused", action="store_true", help="create it paused")
    add_server_args(add)
    add.set_defaults(func=run_add)
    for action, text in (("show", "one schedule with its last runs"), ("pause", "no runs until resumed"),
                         ("resume", "runs again from the next due time (missed times are not run)"),
                         ("delete", "delete it (its jobs are not touched)")):
        one = sub.add_parser(action, help=text)
        one.add_argument("schedule_id")
        add_server_args(one)
        one.set_defaults(func=run_one)


def _table(schedules: list[dict]):
    from rich import box
    from rich.table import Table

    from ..format import schedule_when_text

    table = Table(title="schedules", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("ID", "name", "user", "cron", "time zone", "policy", "next run", "last run"):
        table.add_column(column)
    for s in schedules:
        last = s["runs"][0] if s["runs"] else None
        last_text = "" if last is None else f"{when_text(last['due_at'])} {last['job_id'] or last['outcome']}"
        table.add_row(s["id"], s["name"], s["user"], s["cron"], s["timezone"], s["policy"],
                      "paused" if s["paused"] else schedule_when_text(s.get("next_run_local") or s["next_run_at"],
                                                                      s["timezone"]), last_text)
    return table


@reports_errors
def run_list(args) -> int:
    schedules = client_from(args).schedules(user=getattr(args, "user", None))
    if args.json:
        print_json({"schedules": schedules})
        return 0
    from ..tables import print_table

    print_table(_table(schedules))
    return 0


def _job(args) -> dict:
    from .submit import SPEC_SUFFIXES, load_spec

    words = list(args.words or [])
    path = words.pop(0) if words and (words[0] == "-" or words[0].lower().endswith(SPEC_SUFFIXES)) else None
    job = load_spec(path)
    command = args.command or (shlex.join(words) if words else None)
    if command:
        job["command"] = command
    if args.name:
        job.setdefault("name", args.name)
    if args.file:
        from ..submission import collect_files

        job["files"] = {**(job.get("files") or {}), **collect_files(args.file)}  # relative to the current directory
    if args.vc:
        job["vc"] = args.vc
    if args.gpus is not None:
        tasks = job.get("tasks") or [{"name": "main"}]
        tasks[0]["gpus"] = int(args.gpus) if float(args.gpus).is_integer() else args.gpus
        job["tasks"] = tasks
    if not job.get("command") and not any(t.get("command") for t in job.get("tasks") or []):
        raise BadRequest("no command: give -c 'python grade.py', put it after --, or set command in the spec",
                         field="job.command")
    return job


def default_name(job: dict) -> str:
    """A schedule's name when --name is not given (names are unique per owner: adding the same job again
    replaces it): the job's name, else its script's (``grade`` for ``python grade.py``), else its first word."""
    if job.get("name"):
        return str(job["name"])
    command = job.get("command") or next((t.get("command") for t in job.get("tasks") or [] if t.get("command")), "")
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    interpreter = bool(words) and re.fullmatch(r"(python[0-9.]*|bash|sh|Rscript|julia)", os.path.basename(words[0]))
    script = next((w for w in words[1:] if not w.startswith("-")), None) if interpreter else None
    chosen = script or (words[0] if words else "schedule")
    return os.path.splitext(os.path.basename(chosen))[0] or "schedule"


@reports_errors
def run_add(args) -> int:
    client = client_from(args)
    job = _job(args)
    created = client.add_schedule(args.cron, job, name=args.name or default_name(job), timezone=args.timezone,
                                  policy=args.policy, paused=args.paused)
    if args.json:
        print_json(created)
    else:
        from ..format import schedule_line

        print(schedule_line(created))
    return 0


@reports_errors
def run_one(args) -> int:
    client = client_from(args)
    sid = args.schedule_id
    if args.action == "delete":
        client.delete_schedule(sid)
        if args.json:
            print_json({"deleted": sid})
        else:
            print(f"{sid} deleted")
        return 0
    schedule = {"show": client.schedule, "pause": client.pause_schedule, "resume": client.resume_schedule}[args.action](sid)
    if args.json:
        print_json(schedule)
    else:
        from ..tables import print_table

        print_table(_table([schedule]))
    return 0
