"""The store on a real PostgreSQL (tests/fixtures/postgres.py starts a private cluster): the alembic
migrations build exactly the models' schema on an empty database, the queries answer as on SQLite,
and a real ``jupyter server`` with ``HiveLabApp.db_url`` on PostgreSQL runs jobs and keeps queue order
and history across a restart."""

import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, make_url, text

from fixtures.live_server import LiveServer
from hive_lab_server.store import Base, Store, migrations_head
from test_store import _job


def test_migrations_build_the_models_schema_on_postgres(postgres_url):
    store = Store(postgres_url)
    assert store.engine.dialect.name == "postgresql"
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert conn.execute(text("select version_num from alembic_version")).scalar() == migrations_head()
        assert set(inspect(conn).get_table_names()) == {"alembic_version", *Base.metadata.tables}
    store.close()
    Store(postgres_url).close()  # upgrading an up-to-date store is a no-op


def test_queries_on_postgres(postgres_url):
    store = Store(postgres_url)
    t0 = time.time()  # full float precision survives (double precision, not float4)
    with store.begin() as batch:
        for seq, state, user in [(1, "succeeded", "ann"), (2, "running", "bob"), (3, "queued", "ann")]:
            store.insert_job(batch, _job(seq, state, user))
            store.add_event(batch, f"j-{seq:06d}", state, t0 + seq, "because")
        store.update_job(batch, "j-000003", spec={"tasks": [{"gpus": 2}], "env": {"K": "ü"}}, opportunistic=True)
        store.set_placement(batch, "j-000002", 1, [{"task": "main-0", "group": "main", "index": 0, "rank": 0,
                                                    "node": "node-0", "gpus": [1], "gpu_uuids": ["GPU-x"],
                                                    "cpus": 1.5, "memory_mb": 0, "opportunistic": False}])
        store.add_drain(batch, "node-0", None, t0, "carol")
    with store.begin() as batch:
        store.update_job(batch, "j-000002", state="succeeded", exit_code=0, finished_at=t0)
        store.add_event(batch, "j-000002", "succeeded", t0 + 9, "exit 0")
    assert store.max_seq() == 3
    assert [j["id"] for j in store.active_jobs()] == ["j-000003"]
    job3 = store.get_job("j-000003")
    assert job3["spec"] == {"tasks": [{"gpus": 2}], "env": {"K": "ü"}} and job3["opportunistic"] is True
    jobs, total = store.list_jobs(users=["ann"], limit=1)
    assert total == 2 and [j["id"] for j in jobs] == ["j-000003"]
    assert store.placements(["j-000002"])["j-000002"][0] | {"id": None} == {
        "id": None, "job_id": "j-000002", "attempt": 1, "task": "main-0", "group": "main", "index": 0, "rank": 0,
        "node": "node-0", "gpus": [1], "gpu_uuids": ["GPU-x"], "cpus": 1.5, "memory_mb": 0, "opportunistic": False,
        "share": None, "share_slot": None, "mig_device": None}
    history = store.history("j-000002")
    assert [{k: v for k, v in h.items() if k != "seq"} for h in history] == [
        {"state": "running", "at": t0 + 2, "reason": "because"}, {"state": "succeeded", "at": t0 + 9, "reason": "exit 0"}]
    assert history[0]["seq"] < history[1]["seq"]  # each state change's event sequence number, in order
    assert store.get_job("j-000002")["finished_at"] == t0
    assert store.state_counts() == {"succeeded": 2, "queued": 1}
    assert [(d["node"], d["gpu"], d["by"]) for d in store.drains()] == [("node-0", None, "carol")]
    store.close()


# Each job appends its name to $ORDER; the blocker waits for $GO first.
BLOCK = 'while [ ! -e "$GO" ]; do sleep 0.05; done'
RECORD = 'echo "$NAME" >> "$ORDER"'


@pytest.mark.timeout(120)
def test_live_server_on_postgres_keeps_queue_and_history_across_restart(tmp_path, postgres_cluster, postgres_url):
    go, order = tmp_path / "go", tmp_path / "order.txt"
    srv = LiveServer(tmp_path / "srv", cluster_config={"nodes": 1, "gpus_per_node": 2, "gpu_type": "T4",
                                                       "vcs": {"default": 2}},
                     config={"HiveLabApp": {"db_url": postgres_url}})
    try:
        srv.start()
        url = make_url(postgres_url)
        assert f"{url.host}:{url.port}/{url.database}" in srv.log() and url.password not in srv.log()

        def submit(name, command, gpus=2):
            r = srv.request("POST", "jobs", json={"name": name, "command": command, "tasks": [{"gpus": gpus}],
                                                  "env": {"GO": str(go), "ORDER": str(order), "NAME": name}})
            assert r.status_code == 201, r.text
            return r.json()["id"]

        done = submit("done", "echo hi; exit 3", gpus=1)
        finished = srv.wait_for_job(done, "failed", "succeeded")
        assert finished["state"] == "failed" and finished["exit_code"] == 3
        blocker = submit("blocker", BLOCK)
        srv.wait_for_job(blocker, "running")
        queued = [submit(f"q{i}", RECORD) for i in range(3)]
        before = {j: srv.request("GET", f"jobs/{j}").json() for j in [done, blocker, *queued]}
        assert [before[j]["state"] for j in queued] == ["queued"] * 3
        listed = srv.request("GET", "jobs", params={"state": "queued"}).json()
        assert [j["id"] for j in listed["jobs"]] == queued[::-1] and listed["total"] == 3

        srv.restart()  # SIGTERM, then a new server process on the same PostgreSQL database
        after = {j: srv.request("GET", f"jobs/{j}").json() for j in [done, blocker, *queued]}
        assert after[done] == before[done]  # finished job: state, exit code, history, times unchanged
        assert [h["state"] for h in after[done]["history"]][-1] == "failed"
        assert after[blocker]["state"] == "running"
        assert after[blocker]["placement"] == before[blocker]["placement"]
        for j in queued:  # still queued, same reasons ("N jobs ahead": the order is kept)
            assert after[j]["state"] == "queued"
            assert after[j]["reason"] == before[j]["reason"]
            assert after[j]["history"][: len(before[j]["history"])] == before[j]["history"]
        listed = srv.request("GET", "jobs", params={"state": "queued"}).json()
        assert [j["id"] for j in listed["jobs"]] == queued[::-1]

        # PostgreSQL itself restarts: the server's pooled connections are dead; it reconnects
        postgres_cluster.restart()
        assert srv.request("GET", f"jobs/{done}").json() == before[done]
        # what PostgreSQL text cannot hold (NUL) is refused with a clear 400, nothing half-applied
        r = srv.request("POST", "jobs", json={"name": "a\x00b", "command": "true", "tasks": [{"gpus": 1}]})
        assert r.status_code == 400 and r.json()["field"] == "name" and "NUL" in r.json()["error"], r.text
        assert srv.request("GET", "jobs").json()["total"] == 5

        go.touch()
        for j in [blocker, *queued]:
            assert srv.wait_for_job(j, "succeeded", "failed", timeout=30)["state"] == "succeeded"
        assert order.read_text().split() == ["q0", "q1", "q2"]  # each needs both GPUs: one at a time, in order
        counts = srv.request("GET", "jobs", params={"state": "succeeded"}).json()["total"]
        assert counts == 4
        srv.stop()
        store = Store(postgres_url)  # it really was PostgreSQL that held all this
        assert store.state_counts() == {"succeeded": 4, "failed": 1}
        assert [e["state"] for e in store.history(done)] == [h["state"] for h in after[done]["history"]]
        store.close()
    finally:
        srv.close()


def test_nul_characters_are_refused_with_the_field_named():
    """PostgreSQL text cannot hold NUL (SQLite stored it silently); process args/env cannot either."""
    from hive_lab_server.wire.spec import SpecError, parse_job_spec

    for body, field in [({"name": "a\x00", "command": "x"}, "name"),
                        ({"command": "x", "env": {"A": "b\x00"}}, "env.A"),
                        ({"command": "x", "tasks": [{"gpus": 1}, {"name": "w", "command": "\x00"}]}, "tasks[1].command"),
                        ({"jobName": "j\x00", "taskRoles": []}, "jobName")]:
        with pytest.raises(SpecError) as err:
            parse_job_spec(body)
        assert err.value.field == field and "NUL" in err.value.message
    assert parse_job_spec({"command": "x", "files": {"a.bin": "\x00\x01"}}).files == {"a.bin": "\x00\x01"}
