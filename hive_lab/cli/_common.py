"""What the client subcommands share: server options, JSON output, error reporting."""

from __future__ import annotations

import argparse
import functools
import json
import sys

from ..errors import HiveLabError


def add_server_args(parser: argparse.ArgumentParser, json_output: bool = True) -> None:
    group = parser.add_argument_group("server (default: HIVE_LAB_URL/HIVE_LAB_TOKEN, JupyterHub env, "
                                      "or the running Jupyter server's runtime file)")
    group.add_argument("--url", default=None, help="the Jupyter server's URL, e.g. http://127.0.0.1:8888/")
    group.add_argument("--token", default=None, help="its token (default: HIVE_LAB_TOKEN)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")


def client_from(args):
    from ..client import Client

    return Client(args.url, args.token, on_busy=_say_busy)


def _say_busy(pause: float, sentence: str) -> None:
    """The server shed a request (503 + Retry-After): say so, since the command waits before it retries."""
    print(f"hive-lab: the server is busy ({sentence}); trying again in {pause:g} s", file=sys.stderr, flush=True)


def print_json(data) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def reports_errors(handler):
    """Turn ``HiveLabError`` into ``hive-lab: <message>`` on stderr and exit status 1."""

    @functools.wraps(handler)
    def wrapper(args) -> int:
        try:
            return int(handler(args) or 0)
        except HiveLabError as exc:
            print(f"hive-lab: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("hive-lab: interrupted", file=sys.stderr)
            return 130

    return wrapper


def act_on_each(args, act) -> int:
    """Runs ``act(client, job_id) -> (result, line)`` for each of ``args.jobs``: prints each line (or, with
    ``--json``, every result at the end); a refusal is said as ``hive-lab: JOB: ...`` and the others go on.
    The exit status is 1 when any was refused."""
    client = client_from(args)
    results, failed = [], 0
    for job_id in args.jobs:
        try:
            result, line = act(client, job_id)
            results.append(result)
            if not args.json:
                print(line)
        except HiveLabError as exc:
            failed += 1
            results.append({"id": job_id, "error": str(exc), "status": exc.status})
            print(f"hive-lab: {job_id}: {exc}", file=sys.stderr)
    if args.json:
        print_json({"jobs": results})
    return 1 if failed else 0
