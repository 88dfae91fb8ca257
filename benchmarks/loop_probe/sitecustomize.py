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
    _every: dict = {}  # every callback, by what it ran: count and seconds
    _turns: list = []  # each turn of the loop (one ``_run_once``): (seconds, callbacks run)

    def _what(callback) -> tuple[str, object]:
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, asyncio.Task):
            coro = owner.get_coro()
            frame = getattr(coro, "cr_frame", None)
            name = getattr(coro, "__qualname__", repr(coro))
            handler = frame.f_locals.get("self") if frame is not None and name == "RequestHandler._execute" else None
            if handler is not None:  # which handler: its class and method
                name = f"{type(handler).__name__}.{getattr(getattr(handler, 'request', None), 'method', '?')}"
            return name, (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
        return getattr(callback, "__qualname__", None) or repr(callback), None

    def _timed_run(self):
        t0 = time.perf_counter()
        name, where = _what(self._callback)
        try:
            return _original_run(self)
        finally:
            took = time.perf_counter() - t0
            key = name if where is None else f"{name} (resumed at {os.path.basename(where[0])}:{where[1]})"
            e = _every.setdefault(key, [0, 0.0])
            e[0] += 1
            e[1] += took
            _all["callbacks"] += 1
            _all["busy_s"] += took
            _all["max_s"] = max(_all["max_s"], took)
            if took >= _slow_s:
                _all["slow"] += 1
                _all["slow_s"] += took
                s = _stats.setdefault(key, {"count": 0, "total_s": 0.0, "max_s": 0.0})
                s["count"] += 1
                s["total_s"] += took
                s["max_s"] = max(s["max_s"], took)

    asyncio.events.Handle._run = _timed_run

    import gc

    _gc: dict = {}   # garbage collections by generation: count, seconds, longest (they stop the loop too)
    _gc_start: list = [0.0]

    def _on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            _gc_start[0] = time.perf_counter()
            return
        took = time.perf_counter() - _gc_start[0]
        g = _gc.setdefault(str(info.get("generation")), {"count": 0, "total_s": 0.0, "max_s": 0.0})
        g["count"] += 1
        g["total_s"] += took
        g["max_s"] = max(g["max_s"], took)

    gc.callbacks.append(_on_gc)
    _original_once = asyncio.base_events.BaseEventLoop._run_once

    def _timed_once(self):
        before, t0 = _all["callbacks"], time.perf_counter()
        try:
            return _original_once(self)
        finally:
            _turns.append((time.perf_counter() - t0, _all["callbacks"] - before))

    asyncio.base_events.BaseEventLoop._run_once = _timed_once

    def _dump() -> None:
        top = sorted(_stats.items(), key=lambda kv: -kv[1]["total_s"])
        busy = sorted(t for t in _turns if t[1])  # turns that ran callbacks (not a wait in select alone)
        q = lambda xs, f: xs[min(len(xs) - 1, int(f * (len(xs) - 1)))] if xs else None  # noqa: E731
        turns = {"count": len(busy), "seconds_p50": q([t[0] for t in busy], 0.5),
                 "seconds_p99": q([t[0] for t in busy], 0.99),
                 "callbacks_p50": q(sorted(t[1] for t in busy), 0.5),
                 "callbacks_p99": q(sorted(t[1] for t in busy), 0.99)}
        every = sorted(_every.items(), key=lambda kv: -kv[1][1])[:30]
        with open(_TURNS, "w") as f:
            json.dump({"threshold_ms": _slow_s * 1000, "all": _all, "turns": turns, "gc": _gc,
                       "slow": [{"what": k, **v} for k, v in top],
                       "every": [{"what": k, "count": c, "total_s": t} for k, (c, t) in every]}, f, indent=1)

    atexit.register(_dump)

if _PROFILE:
    import atexit
    import cProfile

    _profiler = cProfile.Profile()
    _profiler.enable()
    atexit.register(lambda: (_profiler.disable(), _profiler.dump_stats(_PROFILE)))

_STEPS = os.environ.get("HIVE_BENCH_STEPS")

if _STEPS:
    # ``HIVE_BENCH_STEPS=FILE``: the steps from a job's POST to its ``running`` commit, timestamped
    # (perf_counter, seconds; with the thread that took each and its CPU time then): FILE gets a JSON list
    # of (step, t, thread, thread CPU) when the process exits. Patched in as the server's modules are imported (nothing changes otherwise).
    import atexit
    import functools
    import importlib.abc
    import inspect
    import json
    import sys
    import threading
    import time

    _steps: list = []

    def _mark(name: str) -> None:
        _steps.append((name, time.perf_counter(), threading.current_thread().name, time.thread_time()))

    def _wrap(owner, attr: str, label: str) -> None:
        fn = getattr(owner, attr, None)
        if fn is None:  # (another commit's code: not every step exists in every version)
            return
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed(*a, **k):
                _mark(label + " >")
                try:
                    return await fn(*a, **k)
                finally:
                    _mark(label + " <")
        else:
            @functools.wraps(fn)
            def timed(*a, **k):
                _mark(label + " >")
                try:
                    return fn(*a, **k)
                finally:
                    _mark(label + " <")
        setattr(owner, attr, staticmethod(timed) if isinstance(vars(owner).get(attr), classmethod) else timed)

    def _unit_label(owner) -> None:
        fn = owner.unit

        @functools.wraps(fn)
        def unit(self, facts, *a, **k):
            kinds = ",".join(sorted({type(e).__name__ for _, e in facts})) or ("insert" if k.get("write") else "-")
            _mark(f"unit[{kinds}] >")
            try:
                return fn(self, facts, *a, **k)
            finally:
                _mark(f"unit[{kinds}] <")
        owner.unit = unit

    _PATCHES = {
        "hive_lab_server.api.handlers.jobs": lambda m: _wrap(m.JobsHandler, "post", "handler.post"),
        "hive_lab_server.jobs.lifecycle.admission": lambda m: (
            _wrap(m.Admission, "submit_grouped", "admission.submit_grouped"),
            _wrap(m.Admission, "_flush_submits", "admission.flush"),
            _wrap(m.Admission, "prepare", "admission.prepare")),
        "hive_lab_server.jobs.lifecycle.shell": lambda m: (
            _unit_label(m.UnitOfWork),
            _wrap(m.UnitOfWork, "_core_submit", "core.submit"),
            _wrap(m.UnitOfWork, "_launch", "shell.launch")),
        "hive_lab_server.jobs.lifecycle.launch_plan": lambda m: (
            _wrap(m, "stage", "plan.stage"), _wrap(m, "launch_request", "plan.request")),
        "hive_lab_server.jobs.start_estimates": lambda m: (
            _wrap(m.StartEstimates, "_start_off_loop", "estimates.start"),
            _wrap(m.StartEstimates, "_refresh_off_loop", "estimates.refresh")),
        "hive_lab_server.jobs.service": lambda m: _wrap(m.HiveService, "cancel", "service.cancel"),
        "hive_lab_server.store": lambda m: _wrap(m.Store, "begin", "store.begin"),
        "hive_lab_server.execution.launchers.local": lambda m: (
            _wrap(m.LocalLauncher, "start", "launcher.start"),
            _wrap(m.LocalLauncher, "_start_tasks", "launcher.start_tasks"),
            _wrap(m.LocalLauncher, "_spawn", "launcher.spawn")),
        "hive_lab_server.execution.launchers.log_copiers": lambda m: (
            _wrap(m.LogCopiers, "start", "copier.start"), _wrap(m.LogCopiers, "refill", "copier.refill")),
        "hive_lab_server.execution.isolation.cgroups": lambda m: _wrap(m.TaskCgroup, "create", "cgroup.create"),
    }

    class _Patcher(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in _PATCHES:
                return None
            sys.meta_path.remove(self)
            try:
                import importlib.util
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            exec_module = loader.exec_module

            def patched_exec(module, _exec=exec_module, _name=name):
                _exec(module)
                _PATCHES[_name](module)
            loader.exec_module = patched_exec
            return spec

    sys.meta_path.insert(0, _Patcher())

    def _dump_steps() -> None:
        with open(_STEPS, "w") as f:
            json.dump(_steps, f)

    atexit.register(_dump_steps)
