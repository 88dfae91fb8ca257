"""``hive-lab vcs``: virtual clusters with guaranteed, used and opportunistic GPUs."""

from __future__ import annotations

from ._common import add_server_args, client_from, print_json, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("vcs", help="virtual clusters: guaranteed vs used vs opportunistic GPUs, queues")
    add_server_args(p)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    vcs = client_from(args).vcs()
    if args.json:
        print_json({"vcs": vcs})
        return 0
    from ..tables import print_table, vcs_table

    print_table(vcs_table(vcs))
    return 0
