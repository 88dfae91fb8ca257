"""Benchmarks only: where a server's event loop spends its long turns (issue 40: reads wait behind them).

A benchmark puts this directory first on the server's ``PYTHONPATH`` (``bench_reads.py --probe FILE``), so
Python imports it at start-up; it does nothing unless asked:

- ``HIVE_BENCH_LOOP_TURNS=FILE``: every callback the asyncio loop runs is timed; those over
  ``HIVE_BENCH_SLOW_MS`` (default 20) are counted by what they ran (a task's coroutine and the line it
  resumed at, else the callback's name), and ``FILE`` gets a JSON summary when the process exits.
- ``HIVE_BENCH_PROFILE=FILE``: a cProfile of the main thread (the event loop's), dumped to ``FILE`` at exit
  (``python -m pstats FILE``).

asyncio's own debug mode logs slow callbacks too, but also wraps every coroutine and checks every call's
thread, which changes the timings it is asked to explain; this costs a clock reading per callback.
"""

import os

_TURNS = os.environ.get("HIVE_BENCH_LOOP_TURNS")
_PROFILE = os.environ.get("HIVE_BENCH_PROFILE")

if _TURNS:
    import asyncio
    import atexit
    import json
    import time

    _slow_s = float(os.environ.get("HIVE_BENCH_SLOW_MS", "20")) / 1000
    _stats: dict = {}
    _all = {"callbacks": 0, "busy_s": 0.0, "slow": 0, "slow_s": 0.0, "max_s": 0.0}
    _original_run = asyncio.events.Handle._run

    def _what(callback) -> tuple[str, object]:
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            coro = owner.get_coro()
            frame = getattr(coro, "cr_frame", None)
            name = getattr(coro, "__qualname__", repr(coro))
            return name, (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
        return getattr(callback, "__qualname__", None) or repr(callback), None

    def _timed_run(self):
        t0 = time.perf_counter()
        name, where = _what(self._callback)
        try:
            return _original_run(self)
        finally:
            took = time.perf_counter() - t0
            _all["callbacks"] += 1
            _all["busy_s"] += took
            _all["max_s"] = max(_all["max_s"], took)
            if took >= _slow_s:
                _all["slow"] += 1
                _all["slow_s"] += took
                key = name if where is None else f"{name} (resumed at {os.path.basename(where[0])}:{where[1]})"
                s = _stats.setdefault(key, {"count": 0, "total_s": 0.0, "max_s": 0.0})
                s["count"] += 1
                s["total_s"] += took
                s["max_s"] = max(s["max_s"], took)

    asyncio.events.Handle._run = _timed_run

    def _dump() -> None:
        top = sorted(_stats.items(), key=lambda kv: -kv[1]["total_s"])
        with open(_TURNS, "w") as f:
            json.dump({"threshold_ms": _slow_s * 1000, "all": _all,
                       "slow": [{"what": k, **v} for k, v in top]}, f, indent=1)

    atexit.register(_dump)

if _PROFILE:
    import atexit
    import cProfile

    _profiler = cProfile.Profile()
    _profiler.enable()
    atexit.register(lambda: (_profiler.disable(), _profiler.dump_stats(_PROFILE)))
