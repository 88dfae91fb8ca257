"""Decision latency of the core scheduler on a loaded cluster: philly (2,816 GPUs) and big20k (20,000 GPUs).

    .venv/bin/python benchmarks/bench_core.py [--samples N] [--load 0.85] [--models philly,big20k] [--bad-gpus 0.01]
    .venv/bin/python benchmarks/bench_core.py --models philly --backlog 300 --estimates 20 --samples 0

``--estimates N``: after filling (and the backlog), N times: one submit or finish, then one
``estimate_starts`` (the server's recompute after a change), timed; every job gets a time limit
(1-24 h) so the forward simulation runs to the end of the queue.

The cluster is first filled to ``--load`` of its GPUs with a deterministic mix of jobs (1, 2, 4, 8 GPUs
and 2x8 / 4x8 gangs, each VC up to its guarantee, plus opportunistic jobs), then each sample times one
``submit`` or one ``finish`` (alternating, so the load stays level): wall time (``time.perf_counter``)
and this thread's CPU time (``time.thread_time``, which other processes on a busy machine do not inflate).
Prints p50/p99 per call kind and overall against the targets. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup, load_cluster_config

TARGET_P99_MS = {"philly": 1.0, "big20k": 5.0}
SIZES = [(1, 1)] * 12 + [(1, 2)] * 3 + [(1, 4)] * 3 + [(1, 8)] * 4 + [(2, 8)] * 1 + [(4, 8)] * 1


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class Load:
    def __init__(self, model: str, seed: int = 7, order: str = "fifo"):
        self.config = load_cluster_config(model)
        self.sched = Scheduler(self.config, policy=order)
        self.rng = random.Random(seed)
        self.vcs = sorted(self.sched.vc_view())
        self.guarantee = {vc: v["guaranteed_gpus"] for vc, v in self.sched.vc_view().items()}
        self.running: list[str] = []
        self.n = 0
        self.now = 0.0
        self.limits = False

    def request(self, opportunistic: bool = False) -> JobRequest:
        self.n += 1
        count, gpus = self.rng.choice(SIZES)
        vc = self.rng.choices(self.vcs, weights=[self.guarantee[v] for v in self.vcs])[0]
        return JobRequest(
            id=f"j{self.n}", vc=vc, user=f"u{self.n % 17}", tasks=(TaskGroup("w", count, gpus),),
            priority=-1 if opportunistic else self.rng.choice([0, 0, 0, 10, 100]), submit_time=self.now,
            time_limit_s=self.rng.choice([3600.0, 4 * 3600.0, 24 * 3600.0]) if self.limits else None,
        )

    def call(self, fn, *args) -> tuple[tuple[float, float], list]:
        """(wall seconds, CPU seconds of this thread) for one call, and its decisions."""
        self.now += 1.0
        c0, t0 = time.thread_time(), time.perf_counter()
        decisions = fn(*args, self.now)
        return (time.perf_counter() - t0, time.thread_time() - c0), decisions

    def track(self, decisions) -> None:
        """Follow running jobs; stop preemption victims at once (grace 0, victims leave), untimed."""
        pending = list(decisions)
        while pending:
            d = pending.pop(0)
            if d.event == "started":
                self.running.append(d.job)
            elif d.event in ("finished", "preempted") and d.job in self.running:
                self.running.remove(d.job)
            elif d.event == "preempting":
                for v in d.victims:
                    try:
                        pending += self.sched.preemption_done(v, self.now, requeue=False)
                    except RequestError:  # already stopped for an earlier preemptor
                        pass

    def break_gpus(self, fraction: float) -> None:
        """Mark ``fraction`` of the GPUs bad, one per node on randomly chosen nodes (partly bad cells)."""
        nodes = sorted(self.config.nodes)
        for name in self.rng.sample(nodes, min(len(nodes), round(fraction * self.sched.gpu_count()))):
            gpus = sorted(self.sched.state.nodes[name].gpu_leaves)
            self.sched.set_gpu_health(name, self.rng.choice(gpus), False, self.now)

    def fill(self, load: float) -> None:
        total = self.sched.gpu_count()
        tries = 0
        while total - self.sched.free_gpu_count() < load * total and tries < total * 4:
            tries += 1
            self.track(self.call(self.sched.submit, self.request(opportunistic=tries % 10 == 0))[1])

    def backlog(self, waiting: int) -> None:
        """Submit guaranteed jobs until ``waiting`` of them queue (or 10x that many submissions)."""
        queued = 0
        for _ in range(10 * waiting):
            if queued >= waiting:
                break
            decisions = self.call(self.sched.submit, self.request())[1]
            queued += sum(1 for d in decisions if d.event == "queued")
            self.track(decisions)

    def measure_estimates(self, n: int) -> list[tuple[float, float, int]]:
        """(wall s, CPU s, estimates) of ``n`` recomputes, each after one submit or finish."""
        out = []
        for i in range(n):
            if i % 2 == 0 or not self.running:
                self.track(self.call(self.sched.submit, self.request())[1])
            else:
                self.track(self.call(self.sched.finish, self.running[self.rng.randrange(len(self.running))])[1])
            c0, t0 = time.thread_time(), time.perf_counter()
            est = self.sched.estimate_starts(self.now)
            out.append((time.perf_counter() - t0, time.thread_time() - c0, sum(e.start is not None for e in est.values())))
        return out

    def measure(self, samples: int) -> dict[str, list[tuple[float, float]]]:
        times: dict[str, list[tuple[float, float]]] = {"submit": [], "finish": []}
        for i in range(samples):
            if i % 2 == 0 or not self.running:
                dt, decisions = self.call(self.sched.submit, self.request(opportunistic=i % 10 == 1))
                times["submit"].append(dt)
            else:
                job = self.running[self.rng.randrange(len(self.running))]
                dt, decisions = self.call(self.sched.finish, job)
                times["finish"].append(dt)
            self.track(decisions)
        return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--load", type=float, default=0.85, help="fraction of GPUs busy before measuring")
    ap.add_argument("--models", default="philly,big20k")
    ap.add_argument("--order", default="fifo", help="the core's queue order inside a VC (fifo, priority, drf, fair_share)")
    ap.add_argument("--backlog", type=int, default=0,
                    help="after filling, keep submitting until this many jobs wait (a queue behind the full cluster)")
    ap.add_argument("--bad-gpus", type=float, default=0.0,
                    help="fraction of the GPUs marked bad before filling (one per node: partly bad cells)")
    ap.add_argument("--estimates", type=int, default=0, metavar="N",
                    help="also time N start-time estimate recomputes (jobs get time limits)")
    args = ap.parse_args(argv)
    load1, _, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load1:.1f} (figures are only comparable on a quiet machine)")
    print(f"decision latency, order {args.order}, {args.samples} calls per model after filling to {args.load:.0%} of the GPUs"
          + (f" and queueing {args.backlog} more jobs" if args.backlog else "")
          + (f", {args.bad_gpus:.1%} of the GPUs bad" if args.bad_gpus else ""))
    for model in args.models.split(","):
        t0 = time.perf_counter()
        load = Load(model, order=args.order)
        load.limits = args.estimates > 0
        load.break_gpus(args.bad_gpus)
        load.fill(args.load)
        load.backlog(args.backlog)
        setup = time.perf_counter() - t0
        busy = load.sched.gpu_count() - load.sched.free_gpu_count()
        times = load.measure(args.samples)
        if args.estimates:
            waiting = sum(1 for j in load.sched.jobs() if j.state == "waiting")
            est = load.measure_estimates(args.estimates)
            wall = [1000 * w for w, _, _ in est]
            cpu = [1000 * c for _, c, _ in est]
            print(f"\n{model}: start-time estimates with {waiting} jobs waiting, {len(load.running)} running: "
                  f"recompute wall p50 {statistics.median(wall):.1f} ms, max {max(wall):.1f} ms; CPU p50 "
                  f"{statistics.median(cpu):.1f} ms, max {max(cpu):.1f} ms ({est[-1][2]} of the waiting jobs "
                  f"got a start; n={len(est)})")
        allt = times["submit"] + times["finish"]
        if not allt:
            continue
        target = TARGET_P99_MS.get(model)
        waiting = sum(1 for j in load.sched.jobs() if j.state == "waiting")
        print(f"\n{model}: {load.sched.gpu_count()} GPUs, {busy} busy ({busy / load.sched.gpu_count():.0%}), "
              f"{len(load.running)} running and {waiting} waiting jobs at the end, setup {setup:.1f} s")
        for kind, pairs in (("submit", times["submit"]), ("finish", times["finish"]), ("all", allt)):
            if pairs:
                wall = [w for w, _ in pairs]
                cpu = [c for _, c in pairs]
                print(f"  {kind:7s} n={len(pairs):5d}  wall p50 {1000 * statistics.median(wall):7.3f} ms  "
                      f"p99 {1000 * percentile(wall, 99):7.3f} ms   CPU p50 {1000 * statistics.median(cpu):7.3f} ms  "
                      f"p99 {1000 * percentile(cpu, 99):7.3f} ms")
        if target is not None:
            p99 = 1000 * percentile([w for w, _ in allt], 99)
            p99_cpu = 1000 * percentile([c for _, c in allt], 99)
            verdict = "meets" if p99 <= target else "MISSES"
            print(f"  target p99 <= {target} ms: wall {verdict} ({p99:.3f} ms, {p99 / target:.2f} of it); "
                  f"CPU time {p99_cpu:.3f} ms ({p99_cpu / target:.2f} of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
