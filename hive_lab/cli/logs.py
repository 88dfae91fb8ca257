"""``hive-lab logs JOB [-f] [--task T]``."""

from __future__ import annotations

import sys

from ._common import add_server_args, client_from, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("logs", help="print a job's log (-f: follow until it ends)")
    p.add_argument("job")
    p.add_argument("--task", default=None, help="task name, e.g. worker-1 (default: the first)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the task ends")
    add_server_args(p, json_output=False)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    client = client_from(args)
    if not args.follow:
        sys.stdout.write(client.log_text(args.job, task=args.task))
        sys.stdout.flush()
        return 0
    from ..format import FINISHED, WAITING, status_line

    job = client.job(args.job)
    if job.get("state") in WAITING:
        # the log only exists once the job runs: wait with a spinner saying why
        from rich.console import Console

        from ..watch import watch_job

        console = Console(stderr=True)
        with console.status(status_line(job)) as status:
            def on_status(info: dict) -> None:
                status.update(status_line(info))
                if info.get("state") not in WAITING:
                    raise _Started()
            try:
                watch_job(client, args.job, on_status=on_status)
            except _Started:
                pass
    for chunk in client.follow_logs(args.job, task=args.task):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    job = client.job(args.job)
    if job.get("state") in FINISHED:
        print(status_line(job), file=sys.stderr)
    return 0


class _Started(Exception):
    pass
