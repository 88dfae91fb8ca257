"""In-process Jupyter server (pytest-jupyter) with hive-lab on the built-in 4-GPU cluster.

The tests here are plain functions driving pytest-jupyter's event loop themselves (``api``,
``wait_state``, ``run``): with pytest-asyncio in auto mode, async tests would run on another loop
than the server's.

The tests sit in one directory per package of ``hive_lab_server`` (tests/test_tests_layout.py). A
helper module shared by the tests of several packages (``checkpointing_job``) sits here, and this
directory is put on ``sys.path`` so that ``import checkpointing_job`` works from every one of them
whichever test runs first (pytest only adds each test file's own directory).
"""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


@pytest.fixture
def jp_server_config(tmp_path):
    return {
        "ServerApp": {"jpserver_extensions": {"hive_lab_server": True}},
        "HiveLabApp": {
            "cluster_config": "default",
            "db_url": f"sqlite:///{tmp_path / 'hive.sqlite'}",
            "jobs_root": str(tmp_path / "jobs"),
            "poll_interval_s": 0.02,
            "stop_grace_s": 1.0,
            "preemption_grace_s": 1.0,
        },
        # the tests run as root with made-up users: jobs as the server's user (tests/isolation covers the rest)
        "Isolation": {"run_as": "server"},
    }


@pytest.fixture
def run(jp_serverapp, jp_asyncio_loop):
    """``run(coro)``: run a coroutine on the server's loop (the server only serves while it runs)."""
    return jp_asyncio_loop.run_until_complete


@pytest.fixture
def hive(jp_serverapp, run):
    """The HiveLabApp of the in-process server, its service started (pytest-jupyter does not run the
    extensions' async start hooks)."""
    app = jp_serverapp.extension_manager.extension_points["hive_lab"].app
    run(app.service.start())
    yield app
    for job_id in list(app.service.active):
        run(app.service.launcher.stop(job_id, 0))


@pytest.fixture
def api(jp_fetch, hive, run):
    """``api(method, path, body=None, **kw) -> (status, json or text)`` under hive_lab/api/."""

    def call(method, path, body=None, **kwargs):
        if body is not None and not isinstance(body, (str, bytes)):
            body = json.dumps(body)
        if method in ("POST", "PUT") and body is None:
            body = b""
        path, _, query = path.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        r = run(jp_fetch("hive_lab", "api", *path.split("/"), method=method, body=body, raise_error=False,
                         allow_nonstandard_methods=True, params=params, **kwargs))
        text = r.body.decode() if r.body else ""
        try:
            return r.code, json.loads(text)
        except ValueError:
            return r.code, text

    return call


@pytest.fixture
def wait_state(api, run):
    """``wait_state(job_id, *states)`` polls GET jobs/{id} until the job is in one of ``states``."""
    import asyncio
    import time

    def wait(job_id, *states, timeout=20):
        deadline = time.monotonic() + timeout
        job = {}
        while time.monotonic() < deadline:
            code, job = api("GET", f"jobs/{job_id}")
            assert code == 200, job
            if job["state"] in states:
                return job
            run(asyncio.sleep(0.03))
        raise AssertionError(f"{job_id} never reached {states}: {job}")

    return wait
