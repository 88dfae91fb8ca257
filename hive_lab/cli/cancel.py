"""``hive-lab cancel JOB...``."""

from __future__ import annotations

import re
import sys

from ..errors import HiveLabError
from ._common import add_server_args, client_from, print_json, reports_errors


ARRAY = re.compile(r"^(a-[0-9]+)(?:\[([^\]]+)\])?$")  # a-000001 or a-000001[3,5-7]


def register(subparsers) -> None:
    p = subparsers.add_parser("cancel", help="cancel jobs or job arrays")
    p.add_argument("jobs", nargs="+", metavar="JOB",
                   help="a job id, an array id (a-...: every element not ended) or some of its elements: "
                        "a-000001[3,5-7]")
    p.add_argument("--reason", default="", help="why (recorded as 'cancelled by YOU (REASON)'; a GPU kernel's "
                                                "notebook shows it)")
    add_server_args(p)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    from ..format import array_line, status_line

    client = client_from(args)
    results, failed = [], 0
    for job_id in args.jobs:
        try:
            array = ARRAY.match(job_id)
            if array:
                result = client.cancel_array(array.group(1), indices=array.group(2))
                results.append(result)
                if not args.json:
                    print(array_line(result))
                continue
            job = client.cancel(job_id, reason=args.reason)
            results.append(job)
            if not args.json:
                print(status_line(job))
        except HiveLabError as exc:
            failed += 1
            results.append({"id": job_id, "error": str(exc), "status": exc.status})
            print(f"hive-lab: {job_id}: {exc}", file=sys.stderr)
    if args.json:
        print_json({"jobs": results})
    return 1 if failed else 0
