"""``hive-lab top``: a live terminal view of the cluster, the VCs and the queue (``rich.live``).

Redraws when the server's event stream says something changed (debounced), not on a timer; a slow
timed refresh keeps the ages current.
"""

from __future__ import annotations

import threading

from ._common import add_server_args, client_from, reports_errors


def register(subparsers) -> None:
    p = subparsers.add_parser("top", help="live view of cluster, VCs and queue")
    p.add_argument("--mine", action="store_true", help="only my jobs in the queue")
    p.add_argument("--limit", type=int, default=30, help="queue rows shown")
    p.add_argument("--interval", type=float, default=10.0, help="redraw at least this often (s)")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    add_server_args(p, json_output=False)
    p.set_defaults(func=run)


@reports_errors
def run(args) -> int:
    from rich.live import Live

    from ..live import Debouncer, LiveFeed
    from .. import tables
    from ..tables import overview

    client = client_from(args)
    console = tables.console()
    if args.once:
        console.print(overview(client, all_jobs=not args.mine, limit=args.limit))
        return 0
    changed = threading.Event()
    debouncer = Debouncer(changed.set, delay=0.2, min_interval=0.5)
    unsubscribe = LiveFeed.for_client(client).subscribe(lambda _msg: debouncer.trigger())
    try:
        with Live(overview(client, all_jobs=not args.mine, limit=args.limit), console=console,
                  auto_refresh=False, screen=False) as live:
            while True:
                changed.wait(args.interval)
                changed.clear()
                try:
                    live.update(overview(client, all_jobs=not args.mine, limit=args.limit), refresh=True)
                except Exception as exc:  # noqa: BLE001 - keep the view up while the server restarts
                    console.print(f"[red]hive-lab: {exc}[/red]")
    except KeyboardInterrupt:
        return 0
    finally:
        unsubscribe()
        debouncer.cancel()
