"""``hive-lab cancel JOB...``."""

from __future__ import annotations

import re

from ._common import act_on_each, add_server_args, reports_errors


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

    def cancel(client, job_id):
        array = ARRAY.match(job_id)
        if array:
            result = client.cancel_array(array.group(1), indices=array.group(2))
            return result, array_line(result)
        job = client.cancel(job_id, reason=args.reason)
        return job, status_line(job)

    return act_on_each(args, cancel)
