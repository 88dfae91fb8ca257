"""Reads under a write flood (issue 40): how long a person looking at the panel waits while submits pour in.

1. The sustainable submit rate: ``--clients`` closed-loop clients for ``--measure`` seconds.
2. For ``--duration`` seconds, submits at ``--factor`` x that rate, open loop (a ``true`` job with no GPU),
   while one reader per endpoint asks ``GET me``, ``GET jobs?limit=50``, ``GET cluster``, ``GET vcs`` and
   ``GET jobs/{a queued job}`` in a loop (each waits for its answer, then ``--read-gap`` seconds). The readers
   run in a process of their own, as a person's browser is one: in the flood's process their answers would
   also wait for its event loop, busy with thousands of submits in flight.

Prints per endpoint: answers, p50 / p99 / max latency and how many were shed (503); and the submits taken,
shed and refused (``max_unfinished_jobs``). Target: every read p99 <= 100 ms while submits are shed at 2x.

    .venv/bin/python benchmarks/bench_reads.py [--duration 30] [--factor 2] [--measure 10] [--clients 50]

``--probe DIR``: the server's event-loop turns over 20 ms, by what ran them, go to ``DIR/turns.json`` and a
cProfile of its loop thread to ``DIR/server.prof`` (``benchmarks/loop_probe``; the figures it prints are then
not comparable with unprobed runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import aiohttp
import psutil

from bench_overload import ROOT, job_counts, pct, session, submit, sustainable_rate  # noqa: F401 (ROOT: tests/ on sys.path)
from fixtures.live_server import LiveServer  # noqa: E402

READS = ("me", "jobs?limit=50", "cluster", "vcs", "job")


async def read_loop(api_url: str, headers: dict[str, str], queued: str, gap: float,
                    stop: asyncio.Event, ready: asyncio.Event | None = None) -> dict:
    """One reader per endpoint of ``READS``, each asking again ``gap`` seconds after its answer, until ``stop``."""
    latencies: dict[str, list[float]] = {r: [] for r in READS}
    shed: dict[str, int] = {r: 0 for r in READS}
    # the readers keep their own connections open (as a person's browser does): a read then waits for the
    # server, not for a connection among the flood's thousands (whose connects the kernel's accept queue
    # drops once it is full: a SYN retried after 1 s, 3 s, ...)
    async with aiohttp.ClientSession(base_url=api_url.rstrip("/") + "/", headers=headers,
                                     connector=aiohttp.TCPConnector(limit=len(READS)),
                                     timeout=aiohttp.ClientTimeout(total=600)) as client:
        async def reader(what: str) -> None:
            path = f"jobs/{queued}" if what == "job" else what
            while not stop.is_set():
                t0 = time.monotonic()
                async with client.get(path) as r:
                    await r.read()
                    if r.status == 503:
                        shed[what] += 1
                    elif r.status == 200:
                        latencies[what].append(time.monotonic() - t0)
                    else:
                        raise AssertionError(f"GET {path}: {r.status}")
                await asyncio.sleep(gap)

        for what in READS:  # one answered read each (connections open) before the flood starts
            async with client.get(f"jobs/{queued}" if what == "job" else what) as r:
                await r.read()
        if ready is not None:
            ready.set()
        await asyncio.gather(*(reader(w) for w in READS))
    return {"latencies": latencies, "read_shed": shed}


async def reader_process() -> None:
    """``--readers``: the readers in a process of their own (stdin: one JSON line with where and what to read;
    stdout: "ready", then, once stdin closes, one JSON line with the latencies)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    job = json.loads(await reader.readline())
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.ensure_future(read_loop(job["api"], job["headers"], job["queued"], job["gap"], stop, ready))
    await ready.wait()
    print("ready", flush=True)
    await reader.read()  # until the parent closes stdin
    stop.set()
    print(json.dumps(await task), flush=True)


async def flood(srv: LiveServer, rate: float, seconds: float, gap: float) -> dict:
    statuses: list[int] = []
    async def post(client, body) -> str:
        while True:  # (a 503 just after the sustainable-rate run: sent again after its Retry-After)
            async with client.post("jobs", json=body) as r:
                if r.status == 201:
                    return (await r.json())["id"]
                assert r.status == 503, (r.status, await r.text())
            await asyncio.sleep(1.0)

    async with session(srv, 4096) as client:
        holder = await post(client, {"command": "sleep 3600", "tasks": [{"gpus": 4}]})
        queued = await post(client, {"command": "true", "tasks": [{"gpus": 1}]})  # waits behind the holder
        # The readers run in a process of their own, as a person's browser does: in this one their answers
        # would also wait for this process's event loop, busy with the flood's thousands of requests in flight.
        readers = await asyncio.create_subprocess_exec(
            sys.executable, os.path.abspath(__file__), "--readers",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert readers.stdin is not None and readers.stdout is not None
        readers.stdin.write((json.dumps({"api": srv.api_url, "headers": srv.headers(), "queued": queued,
                                         "gap": gap}) + "\n").encode())
        await readers.stdin.drain()
        line = await readers.stdout.readline()
        assert line.strip() == b"ready", line

        async def one() -> None:
            statuses.append((await submit(client))[0])

        before = await job_counts(client)
        pending, n, t0 = [], 0, time.monotonic()
        while t0 + n / rate < t0 + seconds:
            await asyncio.sleep(max(0.0, t0 + n / rate - time.monotonic()))
            pending.append(asyncio.ensure_future(one()))
            n += 1
        await asyncio.gather(*pending)
        after = await job_counts(client)
        readers.stdin.close()
        read = json.loads(await readers.stdout.readline())
        assert await readers.wait() == 0
        for job in (queued, holder):
            async with client.delete(f"jobs/{job}") as r:
                await r.read()
    return {"offered": n, "taken": statuses.count(201), "shed": statuses.count(503), "full": statuses.count(507),
            "ended": after["ended"] - before["ended"], "unfinished": (before["unfinished"], after["unfinished"]), **read}


def probe_env(probe: str | None, profile: bool = True) -> dict[str, str]:
    """The server's environment for ``--probe`` (benchmarks/loop_probe/sitecustomize.py), else nothing."""
    if not probe:
        return {}
    out = pathlib.Path(probe).resolve()
    out.mkdir(parents=True, exist_ok=True)
    here = pathlib.Path(__file__).resolve().parent / "loop_probe"
    path = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "HIVE_BENCH_LOOP_TURNS": str(out / "turns.json")}
    if profile:
        env["HIVE_BENCH_PROFILE"] = str(out / "server.prof")
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--factor", type=float, default=2.0, help="offered submits / the sustainable rate")
    ap.add_argument("--rate", type=float, help="offered submits/s, whatever the sustainable rate (to compare two "
                                               "trees under the same flood)")
    ap.add_argument("--measure", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--read-gap", type=float, default=0.1)
    ap.add_argument("--set", action="append", default=[], metavar="TRAIT=JSON",
                    help="a HiveLabApp setting for the server, e.g. --set max_requests_in_flight=0")
    ap.add_argument("--probe", metavar="DIR", help="write the server's long loop turns and a cProfile there")
    ap.add_argument("--no-profile", action="store_true",
                    help="with --probe: the loop's turns only, no cProfile (which slows the server about 2x)")
    ap.add_argument("--readers", action="store_true", help=argparse.SUPPRESS)  # the readers' own process
    args = ap.parse_args()
    if args.readers:
        asyncio.run(reader_process())
        return
    hive = {"poll_interval_s": 0.1}  # as bench_overload
    for item in args.set:
        name, _, value = item.partition("=")
        hive[name] = json.loads(value)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory(prefix="hive-bench-reads-") as tmp:
        srv = LiveServer(tmp, config={"HiveLabApp": hive}, env=probe_env(args.probe, not args.no_profile)).start()
        try:
            rate = asyncio.run(sustainable_rate(srv, args.clients, args.measure))
            print(f"sustainable: {rate:.0f} submits/s ({args.clients} closed-loop clients, {args.measure:g} s)")
            server = psutil.Process(srv.proc.pid)
            cpu0, wall0, client0 = server.cpu_times(), time.monotonic(), psutil.Process().cpu_times()
            offered = args.rate or args.factor * rate
            out = asyncio.run(flood(srv, offered, args.duration, args.read_gap))
            cpu1, wall1, client1 = server.cpu_times(), time.monotonic(), psutil.Process().cpu_times()
            busy = lambda a, b: (b.user + b.system - a.user - a.system) / (wall1 - wall0)  # noqa: E731
            out["cpu"] = (busy(cpu0, cpu1), busy(client0, client1))
        finally:
            srv.close()
    print(f"flood: {out['offered']} submits offered at {offered:.0f}/s for {args.duration:g} s: "
          f"{out['taken']} taken, {out['shed']} shed (in flight), {out['full']} refused (max_unfinished_jobs)")
    print(f"  jobs ended during the flood {out['ended']} ({out['ended'] / args.duration:.0f}/s); unfinished "
          f"{out['unfinished'][0]} -> {out['unfinished'][1]}")
    for what, values in out["latencies"].items():
        ms = [1000 * v for v in values]
        print(f"  GET {what:15s} n={len(ms):5d}  p50 {statistics.median(ms) if ms else float('nan'):7.1f} ms  "
              f"p99 {pct(ms, 99):7.1f} ms  max {max(ms, default=float('nan')):7.1f} ms  shed {out['read_shed'][what]}")
    worst = max((pct([1000 * v for v in values], 99) for values in out["latencies"].values() if values),
                default=float("nan"))
    print(f"worst read p99 {worst:.1f} ms; submits taken {out['taken'] / args.duration:.0f}/s during the flood")
    print(f"CPU during the flood (cores): the server {out['cpu'][0]:.2f} (its threads; its jobs apart), "
          f"the flood's client {out['cpu'][1]:.2f}")
    print(f"target: every read p99 <= 100 ms; load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
