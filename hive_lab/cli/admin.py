"""``hive-lab admin``: drain/undrain nodes and GPUs, mark repaired GPUs healthy, list GPU health,
and check an admin cluster config against the GPUs NVML sees on this machine.

    hive-lab admin drain NODE [--gpu I]      no new work there; running jobs finish
    hive-lab admin undrain NODE [--gpu I]
    hive-lab admin healthy NODE [--gpu I]    a bad GPU was reset/repaired: give it out again
    hive-lab admin gpus                      every GPU: type, job, who holds it, utilisation, bad/drained
    hive-lab admin limits VC [--show]        the VC's per-user limits (default, groups, users)
    hive-lab admin limits VC --set default.max_gpus=2 --set users.ann.max_kernels=1 [--set groups.ta.max_gpus=none]
    hive-lab admin usage --since 7d [--by user|vc|day|job] [--csv]   who used how much
    hive-lab admin history --since 7d --out week.csv   the jobs as a trace to replay (hive-lab simulate --history)
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
    lim = sub.add_parser("limits", help="show or change a VC's per-user limits",
                         description="Show a VC's per-user limits, or change some (admins): each --set edits one "
                                     "value of the limits in effect (PART.KEY=N or PART.NAME.KEY=N; N=none removes "
                                     "it) and the result replaces the VC's limits. Keys: " + ", ".join(LIMIT_KEYS))
    lim.add_argument("vc", metavar="VC")
    lim.add_argument("--show", action="store_true", help="print the limits (the default without --set)")
    lim.add_argument("--set", dest="settings", action="append", default=[], metavar="PATH=N",
                     help="default.KEY=N, groups.GROUP.KEY=N or users.USER.KEY=N (N an integer >= 0, or none)")
    lim.add_argument("--clear", action="store_true", help="start from no limits (then apply the --set values)")
    add_server_args(lim)
    lim.set_defaults(func=run_limits)

    from .admin_usage import register_usage

    register_usage(sub)
    from .admin_history import register_history

    register_history(sub)
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


LIMIT_KEYS = ("max_gpus", "max_running_jobs", "max_kernels", "max_queued_jobs", "max_priority", "max_time_limit_s")


class BadSetting(ValueError):
    pass


def apply_settings(limits: dict, settings: list[str]) -> dict:
    """``limits`` ({"default", "groups", "users"}) with each ``PATH=N`` of ``settings`` applied (a new dict)."""
    out = {"default": dict(limits.get("default") or {}),
           "groups": {k: dict(v) for k, v in (limits.get("groups") or {}).items()},
           "users": {k: dict(v) for k, v in (limits.get("users") or {}).items()}}
    for item in settings:
        path, eq, raw = item.partition("=")
        parts = path.strip().split(".")
        if not eq or len(parts) < 2:
            raise BadSetting(f"--set {item!r}: write default.KEY=N, groups.GROUP.KEY=N or users.USER.KEY=N")
        part, key = parts[0], parts[-1]
        if part == "default" and len(parts) == 2:
            entry = out["default"]
        elif part in ("groups", "users") and len(parts) >= 3:
            entry = out[part].setdefault(".".join(parts[1:-1]), {})
        else:
            raise BadSetting(f"--set {item!r}: write default.KEY=N, groups.GROUP.KEY=N or users.USER.KEY=N")
        if key not in LIMIT_KEYS:
            raise BadSetting(f"--set {item!r}: unknown limit {key!r}; use {', '.join(LIMIT_KEYS)}")
        raw = raw.strip()
        if raw.lower() in ("none", "null", ""):
            entry.pop(key, None)
            continue
        try:
            value = int(raw)
        except ValueError:
            raise BadSetting(f"--set {item!r}: the value must be an integer >= 0 or none") from None
        if value < 0:
            raise BadSetting(f"--set {item!r}: the value must be >= 0 (or none for no limit)")
        entry[key] = value
    for part in ("groups", "users"):
        out[part] = {k: v for k, v in out[part].items() if v}
    return out


@reports_errors
def run_limits(args) -> int:
    client = client_from(args)
    current = client.limits(args.vc)
    if args.settings or args.clear:
        try:
            new = apply_settings({} if args.clear else current, args.settings)
        except BadSetting as exc:
            print(f"hive-lab: {exc}", file=sys.stderr)
            return 2
        current = client.set_limits(args.vc, new)
    if args.json:
        print_json(current)
        return 0
    from rich.table import Table

    from ..tables import print_table

    source = {"store": "set by an admin", "config": "from the server config", "none": "none set"}.get(
        current.get("source"), current.get("source"))
    table = Table(title=f"limits per user in VC {current.get('vc', args.vc)} ({source})")
    table.add_column("who")
    for key in LIMIT_KEYS:
        table.add_column(key.removeprefix("max_").replace("_", " "))
    rows = [("default", current.get("default") or {})]
    rows += [(f"group {g}", v) for g, v in sorted((current.get("groups") or {}).items())]
    rows += [(f"user {u}", v) for u, v in sorted((current.get("users") or {}).items())]
    for who, values in rows:
        table.add_row(who, *("" if values.get(k) is None else str(values[k]) for k in LIMIT_KEYS))
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
