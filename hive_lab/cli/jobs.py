"""``hive-lab jobs``: list jobs (mine by default)."""

from __future__ import annotations

import re
import sys

from ._common import add_server_args, client_from, print_json, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("jobs", help="list jobs (mine; --all for everyone's)")
    p.add_argument("job", nargs="?", help="show one job in full (with its history), or an array's elements (a-...)")
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
    if args.job and ARRAY_ID.match(args.job):
        return _show_array(client, args)
    if args.job:
        job = client.job(args.job)
        if args.json:
            print_json(job)
        else:
            from .. import tables
            from ..format import status_line, when_text

            console = tables.console()
            console.print(status_line(job))
            if job.get("time_limit_s") is not None:
                from ..format import time_limit_text

                console.print(f"  time limit: {time_limit_text(job)}"
                              + (f" (deadline {when_text(job['deadline'])})" if job.get("deadline") else ""))
            from ..format import environment_text, progress_text

            where = environment_text(job)
            if where:
                console.print(f"  environment: {where}", markup=False)

            progress = progress_text(job)
            if progress:
                console.print(f"  progress: {progress}", markup=False)
            source = (job.get("spec") or {}).get("source") or {}
            if source.get("format"):  # a job file of another platform: what of it was not applied (e.g. --no-image)
                console.print(f"  from: {source['format']} job file", markup=False)
                for note in source.get("not_applied") or []:
                    console.print(f"  not applied: {note}", markup=False)
            for h in job.get("history") or []:
                console.print(f"  {when_text(h.get('at'))}  {h.get('state', ''):<10} {h.get('reason') or ''}",
                              markup=False)
        return 0
    user = args.user or (None if args.all else "me")
    if user not in (None, "me"):
        me = client.me()
        if user != me.get("user") and not me.get("admin"):
            print(f"hive-lab: only admins may list another user's jobs; you are {me.get('user')} "
                  "(leave out --user for your own jobs, or --all for the whole queue)", file=sys.stderr)
            return 1
    # an array is one line with its counts by state; its elements are left out of the jobs
    arrays = [] if args.state or args.vc else client.arrays(
        user="me" if user in (None, "me") else user, limit=args.limit or 1000).get("arrays", [])
    jobs = client.jobs(user=user, vc=args.vc, state=args.state, limit=args.limit or None, elements=False)
    if args.json:
        print_json({"jobs": jobs, "count": len(jobs), "arrays": arrays})
        return 0
    from ..tables import jobs_table, print_table

    if arrays:
        from ..format import array_line

        print("arrays (hive-lab jobs ARRAY lists its elements):")
        for a in arrays:
            print("  " + array_line(a))
    me = client.me().get("user")
    print_table(jobs_table(jobs, title="everyone's jobs" if user is None else f"jobs of {user if user != 'me' else me}",
                           me=me))
    return 0


ARRAY_ID = re.compile(r"^a-[0-9]+$")


def _show_array(client, args) -> int:
    """``hive-lab jobs a-000001``: the array's line, then its results table (``hive_lab.array_results``: one
    row per element with its parameters, state, run time and metrics, sorted by the first metric)."""
    from ..array_results import collect_results, results_text
    from ..format import array_line

    array = client.array(args.job, limit=1)
    table = collect_results(client, args.job)
    if args.state:
        wanted = set(args.state.split(","))
        table.rows = [r for r in table.rows if r["state"] in wanted]
    if args.json:
        elements = client.array_elements(args.job)
        if args.state:
            elements = [e for e in elements if e["state"] in wanted]
        print_json({**array, "elements": elements, "results": table.rows})
        return 0
    print(array_line(array))
    text = results_text(table)
    if text:
        print(text)
    return 0
