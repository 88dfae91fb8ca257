"""``hive-lab admin``: drain/undrain nodes and GPUs, mark repaired GPUs healthy, list GPU health,
and check an admin cluster config against the GPUs NVML sees on this machine.

    hive-lab admin drain NODE [--gpu I]      no new work there; running jobs finish
    hive-lab admin undrain NODE [--gpu I]
    hive-lab admin healthy NODE [--gpu I]    a bad GPU was reset/repaired: give it out again
    hive-lab admin gpus                      every GPU: type, job, who holds it, utilisation, bad/drained
    hive-lab admin usage --since 7d [--by user|vc|day|job] [--csv]   who used how much
    hive-lab admin check-hardware --cluster cluster.yaml   (local, no server needed)
"""

from __future__ import annotations

import argparse
import sys

from ._common import add_server_args, client_from, print_json, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("admin", help="admins: drain/undrain nodes and GPUs, GPU health, hardware check",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="admin_command", metavar="ACTION")
    for action, text in (("drain", "stop giving out a node (or one GPU); running jobs finish"),
                         ("undrain", "give out a drained node (or GPU) again"),
                         ("healthy", "mark a node's (or one GPU's) bad GPUs healthy after a reset or repair")):
        a = sub.add_parser(action, help=text, description=text)
        a.add_argument("node", metavar="NODE")
        a.add_argument("--gpu", type=int, metavar="I", help="only this GPU index on the node")
        add_server_args(a)
        a.set_defaults(func=run_node_action, action=action)
    g = sub.add_parser("gpus", help="every GPU with its job, live utilisation and bad/drained state")
    add_server_args(g)
    g.set_defaults(func=run_gpus)
    from .admin_usage import register_usage

    register_usage(sub)
    c = sub.add_parser("check-hardware", help="compare a cluster config with the GPUs NVML sees here",
                       description="compare a cluster config with the GPUs NVML sees on this machine")
    c.add_argument("--cluster", required=True, help="cluster config file (HiveD or short form)")
    c.add_argument("--nvml-backend", default="auto", help="auto (real NVML) or fake:/path/to/description.yaml")
    c.add_argument("--node", help="this machine's node name in the config (default: the host name)")
    c.set_defaults(func=run_check)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


@reports_errors
def run_node_action(args) -> int:
    client = client_from(args)
    action = {"drain": client.drain, "undrain": client.undrain, "healthy": client.mark_healthy}[args.action]
    result = action(args.node, args.gpu)
    if args.json:
        print_json(result)
    else:
        where = args.node if args.gpu is None else f"GPU {args.gpu} of {args.node}"
        done = {"drain": "drained (running jobs finish; nothing new starts there)",
                "undrain": "undrained", "healthy": "marked healthy"}[args.action]
        print(f"{where}: {done}")
    return 0


@reports_errors
def run_gpus(args) -> int:
    cluster = client_from(args).cluster()
    gpus = cluster.get("gpus", [])
    if args.json:
        print_json({"gpus": gpus})
        return 0
    from rich.table import Table

    from ..tables import print_table

    table = Table(title=f"{cluster.get('gpus_free', '?')}/{cluster.get('gpus_total', '?')} GPUs free")
    for column in ("node", "gpu", "type", "state", "job", "user", "util %", "mem MiB", "health"):
        table.add_column(column)
    for g in gpus:
        health = "bad" if g.get("bad") else "ok"
        if g.get("bad") and g.get("bad_reason"):
            health = f"bad: {g['bad_reason']}"
        if g.get("drained"):
            health += ", drained"
        util = g.get("utilization")
        mem = g.get("memory_used_mb")
        table.add_row(str(g.get("node")), str(g.get("index")), str(g.get("type") or ""), str(g.get("state") or ""),
                      str(g.get("job") or ""), str(g.get("user") or ""), "" if util is None else str(util), "" if mem is None else str(mem), health)
    print_table(table)
    return 0


def run_check(args) -> int:
    from hive_lab_server.hardware.inventory import compare_with_config, detect_local_inventory
    from hive_scheduler import load_cluster_config

    try:
        config = load_cluster_config(args.cluster)
    except (ValueError, OSError) as exc:
        print(f"hive-lab: {args.cluster}: {exc}", file=sys.stderr)
        return 1
    inv = detect_local_inventory(args.nvml_backend, args.node)
    if inv is None:
        print("hive-lab: NVML sees no NVIDIA GPU on this machine; nothing to compare", file=sys.stderr)
        return 1
    differences = compare_with_config(inv, config)
    for line in differences:
        print(line)
    if not differences:
        print(f"{inv.node}: the config matches the {len(inv.gpus)} GPUs NVML sees")
    return 1 if differences else 0
