"""``hive-lab jobs``: list jobs (mine by default)."""

from __future__ import annotations

import sys

from ._common import add_server_args, client_from, print_json, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("jobs", help="list jobs (mine; --all for everyone's)")
    p.add_argument("job", nargs="?", help="show one job in full (with its history)")
    p.add_argument("--all", action="store_true", help="everyone's jobs")
    p.add_argument("--user", default=None, metavar="NAME",
                   help="one user's jobs (admins: anyone's; others: their own)")
    p.add_argument("--vc", default=None)
    p.add_argument("--state", default=None, help="comma-separated, e.g. queued,running")
    p.add_argument("--limit", type=int, default=50, help="at most this many (0: all)")
    add_server_args(p)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    client = client_from(args)
    if args.job:
        job = client.job(args.job)
        if args.json:
            print_json(job)
        else:
            from .. import tables
            from ..format import status_line

            console = tables.console()
            console.print(status_line(job))
            if job.get("time_limit_s") is not None:
                from ..format import time_limit_text

                console.print(f"  time limit: {time_limit_text(job)}"
                              + (f" (deadline {job['deadline']})" if job.get("deadline") else ""))
            from ..format import environment_text, progress_text

            where = environment_text(job)
            if where:
                console.print(f"  environment: {where}", markup=False)

            progress = progress_text(job)
            if progress:
                console.print(f"  progress: {progress}", markup=False)
            for h in job.get("history") or []:
                console.print(f"  {h.get('at', '')}  {h.get('state', ''):<10} {h.get('reason') or ''}")
        return 0
    user = args.user or (None if args.all else "me")
    if user not in (None, "me"):
        me = client.me()
        if user != me.get("user") and not me.get("admin"):
            print(f"hive-lab: only admins may list another user's jobs; you are {me.get('user')} "
                  "(leave out --user for your own jobs, or --all for the whole queue)", file=sys.stderr)
            return 1
    jobs = client.jobs(user=user, vc=args.vc, state=args.state, limit=args.limit or None)
    if args.json:
        print_json({"jobs": jobs, "count": len(jobs)})
        return 0
    from ..tables import jobs_table, print_table

    me = client.me().get("user")
    print_table(jobs_table(jobs, title="everyone's jobs" if user is None else f"jobs of {user if user != 'me' else me}",
                           me=me))
    return 0
