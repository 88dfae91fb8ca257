"""Overload: a real ``jupyter server`` offered twice the submit rate it sustains (issue 24).

1. The sustainable rate: ``--clients`` closed-loop clients submit for ``--measure`` seconds (each sends its
   next submit when answered); submits answered 201 per second is the rate the server sustains.
2. The overload: submits at twice that rate, open loop (sent on schedule whether or not earlier ones were
   answered), for ``--duration`` seconds (the issue's figure is 300), while one client asks ``GET me``
   every second. Each submit is answered 201 (taken), 503 with Retry-After (shed: more than
   ``HiveLabApp.max_requests_in_flight`` in flight; or full: ``HiveLabApp.max_unfinished_jobs`` jobs
   unfinished) or something else (counted as errors).

Prints: the sustainable rate, the offered rate, taken, shed and full counts, the max and p99 latency of
answered requests (201 and 503 apart), the max latency of ``GET me``, the jobs that ended during the
overload and those left unfinished (``GET metrics``), and the server's RSS every ``--every`` seconds.
Jobs are ``true`` with no GPU (1 CPU each), but the server answers submits far faster than it runs
jobs (each is a process to start, watch and reap, and three stored state changes): offered twice the
answered rate, it takes jobs until it holds ``max_unfinished_jobs``, then one per job that ends. What
the server keeps per unfinished job is then bounded, and RSS should level off rather than grow with time.

    .venv/bin/python benchmarks/bench_overload.py [--duration 300] [--measure 20] [--clients 100] [--every 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import tempfile
import time

import aiohttp
import psutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.live_server import LiveServer  # noqa: E402

BODY = json.dumps({"command": "true", "tasks": [{"gpus": 0}]}).encode()
JSON = {"Content-Type": "application/json"}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(round((len(xs) - 1) * q / 100)))]


def session(srv: LiveServer, connections: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(base_url=srv.api_url.rstrip("/") + "/", headers=srv.headers(),
                                 connector=aiohttp.TCPConnector(limit=connections),
                                 timeout=aiohttp.ClientTimeout(total=600))


async def submit(client: aiohttp.ClientSession) -> tuple[int, float]:
    """(status, seconds); status 507 stands for a 503 because the server holds max_unfinished_jobs."""
    t0 = time.monotonic()
    try:
        async with client.post("jobs", data=BODY, headers=JSON) as r:
            body = await r.read()
            full = r.status == 503 and b"max_unfinished_jobs" in body
            return 507 if full else r.status, time.monotonic() - t0
    except aiohttp.ClientError:
        return -1, time.monotonic() - t0


ENDED = ("succeeded", "failed", "cancelled", "preempted", "lost", "rejected")


async def job_counts(client: aiohttp.ClientSession) -> dict[str, int]:
    """Jobs by state, from the server's own gauge (``GET metrics``: never shed)."""
    async with client.get("metrics") as r:
        text = (await r.read()).decode()
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith('hive_lab_jobs{state="'):
            state = line.split('"')[1]
            counts[state] = int(float(line.rsplit(" ", 1)[1]))
    counts["ended"] = sum(counts.get(s, 0) for s in ENDED)
    counts["unfinished"] = sum(n for s, n in counts.items() if s not in ENDED and s != "ended")
    return counts


async def sustainable_rate(srv: LiveServer, clients: int, seconds: float) -> float:
    taken = 0
    async with session(srv, clients) as client:
        end = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal taken
            while time.monotonic() < end:
                status, _ = await submit(client)
                taken += status == 201

        t0 = time.monotonic()
        await asyncio.gather(*(loop() for _ in range(clients)))
        return taken / (time.monotonic() - t0)


async def overload(srv: LiveServer, rate: float, seconds: float, every: float) -> dict:
    results: list[tuple[int, float]] = []
    me_latencies: list[float] = []
    proc = psutil.Process(srv.proc.pid)
    rss: list[int] = []
    async with session(srv, 4096) as client:
        done = asyncio.Event()
        jobs_start = await job_counts(client)

        async def sample_rss() -> None:
            while not done.is_set():
                rss.append(proc.memory_info().rss)
                try:
                    await asyncio.wait_for(done.wait(), every)
                except asyncio.TimeoutError:
                    pass

        async def ask_me() -> None:
            while not done.is_set():
                t0 = time.monotonic()
                async with client.get("me") as r:
                    await r.read()
                    assert r.status == 200, r.status
                me_latencies.append(time.monotonic() - t0)
                await asyncio.sleep(1.0)

        async def one() -> None:
            results.append(await submit(client))

        watcher = asyncio.ensure_future(ask_me())
        sampler = asyncio.ensure_future(sample_rss())
        pending = []
        t0 = time.monotonic()
        n = 0
        while True:
            due = t0 + n / rate
            if due >= t0 + seconds:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            pending.append(asyncio.ensure_future(one()))
            n += 1
        await asyncio.gather(*pending)
        done.set()
        await watcher
        await sampler
        rss.append(proc.memory_info().rss)
        jobs_end = await job_counts(client)
    taken = [t for s, t in results if s == 201]
    shed = [t for s, t in results if s in (503, 507)]
    return {"offered": n, "seconds": seconds, "taken": len(taken), "shed": sum(s == 503 for s, _ in results),
            "full": sum(s == 507 for s, _ in results),
            "errors": len(results) - len(taken) - len(shed), "taken_max": max(taken, default=float("nan")),
            "taken_p99": pct(taken, 99), "shed_max": max(shed, default=float("nan")),
            "me_max": max(me_latencies, default=float("nan")), "rss": rss,
            "ended": jobs_end["ended"] - jobs_start["ended"], "unfinished_start": jobs_start["unfinished"],
            "unfinished_end": jobs_end["unfinished"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of overload (the issue: 300)")
    ap.add_argument("--measure", type=float, default=20.0, help="seconds of the closed loop that finds the rate")
    ap.add_argument("--clients", type=int, default=100,
                    help="closed-loop clients (group commit takes more submits per commit the more wait at once)")
    ap.add_argument("--factor", type=float, default=2.0, help="offered rate = factor x sustainable rate")
    ap.add_argument("--every", type=float, default=30.0, help="seconds between the RSS samples printed")
    ap.add_argument("--rate", type=float, default=None,
                    help="offer this many submits/s instead (to compare two builds at the same load)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        srv = LiveServer(tmp, config={"HiveLabApp": {"poll_interval_s": 0.1}})
        try:
            srv.start()
            rate = asyncio.run(sustainable_rate(srv, args.clients, args.measure))
            print(f"sustainable rate: {rate:.1f} submits/s ({args.clients} closed-loop clients, {args.measure:.0f} s)")
            offered = args.rate or rate * args.factor
            r = asyncio.run(overload(srv, offered, args.duration, args.every))
            print(f"offered {offered / rate:.2g}x = {offered:.1f} submits/s for {args.duration:.0f} s: "
                  f"{r['offered']} submits, {r['taken']} taken (201), {r['shed']} shed (503 + Retry-After: "
                  f"max_requests_in_flight), {r['full']} refused (503 + Retry-After: max_unfinished_jobs), "
                  f"{r['errors']} other")
            print(f"jobs: {r['ended']} ended during the overload ({r['ended'] / args.duration:.1f}/s); unfinished: "
                  f"{r['unfinished_start']} at its start, {r['unfinished_end']} at its end")
            print(f"latency of answered submits: 201 max {r['taken_max']:.2f} s, p99 {r['taken_p99']:.2f} s; "
                  f"503 max {r['shed_max']:.2f} s; GET me max {r['me_max']:.2f} s")
            samples = " ".join(f"{b / 2**20:.0f}" for b in r["rss"])
            print(f"server RSS (MiB) every {args.every:.0f} s of the overload: {samples}")
        finally:
            srv.close()


if __name__ == "__main__":
    main()
