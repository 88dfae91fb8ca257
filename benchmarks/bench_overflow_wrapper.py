"""Decision latency of the core bare vs wrapped in OverflowScheduler (what c.HiveLabApp.overflow adds):
3,000 submits (VC a asked twice its share, so its jobs overflow) and finishes, 128 GPUs, 4 VCs.
Run: PYTHONPATH=scheduler python benchmarks/bench_overflow_wrapper.py"""
import statistics, time, random
from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.overflow import OverflowScheduler
CFG = {"nodes": 16, "gpus_per_node": 8, "gpu_type": "A100", "vcs": {"a": 32, "b": 32, "c": 32, "d": 32}}
def run(wrap, seed=0):
    rnd = random.Random(seed)
    s = Scheduler(CFG); s = OverflowScheduler(s) if wrap else s
    lat, live, now = [], [], 0.0
    for i in range(3000):
        now += 1
        vc = rnd.choice("aabcd")  # VC a gets twice its share: its jobs overflow
        t0 = time.perf_counter(); s.submit(JobRequest(id=f"j{i}", vc=vc, user="u", priority=0, tasks=(TaskGroup("w", 1, rnd.choice([1, 1, 2, 4, 8])),)), now); lat.append(time.perf_counter() - t0)
        live.append(f"j{i}")
        if len(live) > 30:
            j = live.pop(rnd.randrange(len(live)))
            t0 = time.perf_counter(); s.finish(j, now); lat.append(time.perf_counter() - t0)
    lat.sort()
    return statistics.median(lat) * 1e3, lat[int(len(lat) * .99)] * 1e3
for wrap in (False, True):
    print("overflow" if wrap else "bare    ", "median %.3f ms p99 %.3f ms" % run(wrap))
