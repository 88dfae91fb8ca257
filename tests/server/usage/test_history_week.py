"""A synthetic "week" through a REAL Jupyter server with hive-lab (real service, core, SQLite store, local
launcher running real processes) and an injected clock, exported (``GET history``) and replayed (issue 28).

The test moves the clock itself: at each step of the script it sets the time, submits, releases (the job's
process exits when its release file appears) or cancels, then waits until the jobs are in the states the
step leads to (conditions, no sleeps-then-asserts). The store's times are then the script's times, so the
observed waits are known exactly; the replay of the live configuration must reproduce them within the
live check's tolerance (it does exactly), and a bigger VC must shorten them.
"""

import asyncio
import io
import json
import time

import pytest

T0 = 1_790_000_000.0  # a Monday, 2026-09-21, 14:13 UTC (any fixed instant)
DAY = 86400.0
CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"cv-101": 1, "lab": 3}}
USERS = {"ann": {"groups": ["cv-101"]}, "bob": {"groups": ["cv-101"]}, "rita": {"groups": ["lab"]},
         "carol": {"groups": ["staff"]}}


class Clock:
    """The test's clock. The server gets ``read`` (a function: traitlets config deep-copies objects, not
    functions), which reads this object's time."""

    def __init__(self) -> None:
        self.t = T0
        self.read = lambda: self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def jp_server_config(tmp_path, clock):
    return {
        "ServerApp": {"jpserver_extensions": {"hive_lab_server": True},
                      "identity_provider_class": "hive_lab_server.auth.identity.TokenMapIdentityProvider"},
        "TokenMapIdentityProvider": {"users": {f"tok-{name}": dict(spec, username=name) for name, spec in USERS.items()}},
        "HiveLabApp": {
            "cluster_config": CLUSTER, "db_url": f"sqlite:///{tmp_path / 'hive.sqlite'}",
            "jobs_root": str(tmp_path / "jobs"), "poll_interval_s": 0.02, "stop_grace_s": 1.0,
            "vc_access": {"@cv-101": ["cv-101"], "@lab": ["lab"]}, "admin_users": ["carol"],
            "overflow": False,  # the live configuration replayed: queued jobs wait for their VC's cells
            "clock": clock.read,
        },
        "Isolation": {"run_as": "server"},
    }


@pytest.fixture
def call(jp_fetch, hive, run):
    def do(method, path, user="carol", body=None, params=None):
        r = run(jp_fetch("hive_lab", "api", *path.split("/"), method=method, raise_error=False,
                         body=None if body is None else json.dumps(body), params=params or {},
                         headers={"Authorization": f"token tok-{user}"}, allow_nonstandard_methods=True))
        return r.code, json.loads(r.body or b"null")
    return do


# (hours after T0, action, job, user, vc, gpus); then the jobs that run right after the step
WEEK = [
    (0.0, "submit", "a1", "ann", "cv-101", 1),
    (0.1, "submit", "r1", "rita", "lab", 1),
    (0.25, "submit", "b1", "bob", "cv-101", 1),  # waits for a1
    (0.5, "submit", "a2", "ann", "cv-101", 1),  # waits for a1 and b1
    (1.0, "release", "a1"),  # b1 starts: waited 45 min
    (2.0, "release", "b1"),  # a2 starts: waited 1.5 h
    (2.5, "release", "a2"),
    (14.0, "release", "r1"),
    (24.0, "submit", "b2", "bob", "cv-101", 1),
    (24.1, "submit", "a3", "ann", "cv-101", 1),  # waits for b2
    (24.6, "release", "b2"),
    (25.0, "release", "a3"),
    (48.0, "submit", "b3", "bob", "cv-101", 1),
    (48.2, "submit", "a4", "ann", "cv-101", 1),  # waits, then ann gives up
    (48.3, "cancel", "a4"),
    (49.0, "release", "b3"),
    (72.0, "submit", "a5", "ann", "cv-101", 1),  # still running at the export
]
OBSERVED_WAIT_H = {"a1": 0, "r1": 0, "b1": 0.75, "a2": 1.5, "b2": 0, "a3": 0.5, "b3": 0, "a4": 0.1, "a5": 0}


@pytest.mark.timeout(300)
def test_a_week_exported_and_replayed_reproduces_the_observed_waits(call, hive, run, clock, tmp_path):
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.history import parse_history, write_history
    from hive_scheduler.sim.replay import LivePolicy, replay_history

    release = tmp_path / "release"
    release.mkdir()
    ids: dict[str, str] = {}
    finished: set[str] = set()

    def settle(running: set[str]) -> None:
        """Wait until the jobs in ``running`` run, released ones succeeded and the rest queue."""
        deadline = time.monotonic() + 60
        while True:
            states = {name: call("GET", f"jobs/{job_id}")[1]["state"] for name, job_id in ids.items()}
            want = {name: "succeeded" if name in finished else "cancelled" if name in cancelled
                    else "running" if name in running else "queued" for name in ids}
            if states == want:
                return
            assert time.monotonic() < deadline, f"at {clock.t - T0:.0f} s: {states} != {want}"
            run(asyncio.sleep(0.02))

    cancelled: set[str] = set()
    running: set[str] = set()
    queue: dict[str, list[str]] = {}
    for hours, action, name, *rest in WEEK:
        clock.t = T0 + hours * 3600
        if action == "submit":
            user, vc, gpus = rest
            command = f"while [ ! -e {release / name} ]; do sleep 0.02; done"
            code, job = call("POST", "jobs", user=user, body={"name": name, "vc": vc, "command": command,
                                                              "tasks": [{"gpus": gpus}]})
            assert code == 201, job
            ids[name] = job["id"]
            busy = sum(1 for n in running if n in queue.get(vc, []))
            queue.setdefault(vc, []).append(name)
            if busy < CLUSTER["vcs"][vc] // gpus:
                running.add(name)
        elif action == "release":
            (release / name).touch()
            finished.add(name)
            running.discard(name)
            vc = next(v for v, names in queue.items() if name in names)
            waiting = [n for n in queue[vc] if n not in running and n not in finished and n not in cancelled]
            if waiting and vc == "cv-101":
                running.add(waiting[0])
        elif action == "cancel":
            code, _ = call("DELETE", f"jobs/{ids[name]}", user="ann")
            assert code in (200, 202), _
            cancelled.add(name)
        settle(running)

    clock.t = T0 + 80 * 3600
    code, report = call("GET", "history", params={"since": "7d"})
    assert code == 200, report
    rows = {r["job_id"]: r for r in report["jobs"]}
    name_of = {job_id: name for name, job_id in ids.items()}
    assert set(name_of) == set(rows)
    observed = {name_of[j]: r["observed_wait_s"] for j, r in rows.items()}
    assert observed == {n: pytest.approx(h * 3600, abs=1e-6) for n, h in OBSERVED_WAIT_H.items()}
    assert rows[ids["a4"]]["duration_s"] is None and rows[ids["a4"]]["end_time_s"] == pytest.approx(
        (48.3 * 3600) - (80 * 3600 - 7 * DAY))
    assert rows[ids["a1"]]["duration_s"] == pytest.approx(3600)
    assert rows[ids["a5"]]["status"] == "running" and rows[ids["a5"]]["duration_s"] == pytest.approx(8 * 3600)
    assert {r["user"] for r in rows.values()} == {"user-001", "user-002", "user-003"}  # nobody's name
    assert report["policy"] == {"order": "fifo", "overflow": False, "queueing": "skip"}

    buf = io.StringIO()
    write_history(report["jobs"], buf)
    config = load_cluster_config(report["cluster"])
    history = parse_history(io.StringIO(buf.getvalue()), config)
    live = LivePolicy(**report["policy"])
    result = replay_history(history, config, live=live, changes={"vcs": {"cv-101": 2}})
    assert result.check.ok, result.check.sentence()
    assert result.check.matched == result.check.jobs == len(ids)
    replayed = {name_of[j]: w for j, w in result.live.waits.items()}
    assert replayed == {n: pytest.approx(h * 3600, abs=1e-6) for n, h in OBSERVED_WAIT_H.items()}  # exactly
    bigger = result.scenarios[1]
    live_cv = result.live.summary()["by_vc"]["cv-101"]["avg_wait_s"]
    bigger_cv = bigger.summary()["by_vc"]["cv-101"]["avg_wait_s"]
    assert bigger_cv < live_cv, (bigger_cv, live_cv)
    assert {name_of[j]: w for j, w in bigger.waits.items()}["a2"] < 1.5 * 3600


def test_history_is_for_admins_and_checks_its_query(call):
    code, body = call("GET", "history", user="ann")
    assert code == 403 and "only admins" in body["error"]
    code, body = call("GET", "history", params={"since": "last week"})
    assert code == 400 and body["field"] == "since" and "7d" in body["error"]
    code, body = call("GET", "history", params={"real_names": "maybe"})
    assert code == 400 and body["field"] == "real_names"
