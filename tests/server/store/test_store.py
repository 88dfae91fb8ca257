"""The store: alembic migrations build exactly the models' schema; WAL on SQLite; basic queries."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from hive_lab_server.store import Base, Store, migrations_head


def _job(seq, state="queued", user="ann", vc="default"):
    return {"seq": seq, "id": f"j-{seq:06d}", "name": "n", "user": user, "vc": vc, "kind": "batch", "state": state,
            "reason": "", "priority": 0, "opportunistic": False, "gpus": 1, "gpu_type": None, "spec": {"tasks": []},
            "submitted_at": float(seq), "started_at": None, "finished_at": None, "exit_code": None, "retries": 0,
            "max_retries": 0, "attempt": 0, "working_dir": "/w", "output_dir": "/o", "updated_at": float(seq)}


def test_migrations_match_models(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
        assert conn.execute(text("select version_num from alembic_version")).scalar() == migrations_head()
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    store.close()
    Store(f"sqlite:///{tmp_path / 'a.sqlite'}").close()  # upgrading an up-to-date store is a no-op


def test_queries(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'b.sqlite'}")
    with store.begin() as conn:
        for seq, state, user in [(1, "succeeded", "ann"), (2, "running", "bob"), (3, "queued", "ann")]:
            store.insert_job(conn, _job(seq, state, user))
            store.add_event(conn, f"j-{seq:06d}", state, float(seq), "because")
        store.set_placement(conn, "j-000002", 1, [{"task": "main-0", "group": "main", "index": 0, "rank": 0,
                                                   "node": "node-0", "gpus": [1], "gpu_uuids": None, "cpus": 1.0,
                                                   "memory_mb": 0, "opportunistic": False}])
    assert store.max_seq() == 3
    assert [j["id"] for j in store.active_jobs()] == ["j-000002", "j-000003"]
    jobs, total = store.list_jobs(users=["ann"], limit=1)
    assert total == 2 and [j["id"] for j in jobs] == ["j-000003"]
    jobs, total = store.list_jobs(states=["running", "queued"], offset=1)
    assert total == 2 and [j["id"] for j in jobs] == ["j-000002"]
    assert store.placements(["j-000002"])["j-000002"][0]["gpus"] == [1]
    assert store.history("j-000001") == [{"seq": 1, "state": "succeeded", "at": 1.0, "reason": "because"}]
    assert store.state_counts() == {"succeeded": 1, "running": 1, "queued": 1}
    store.close()


def test_vc_limits_are_stored_whole_and_replaced(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'c.sqlite'}")
    assert store.vc_limits() == {}
    with store.begin() as batch:
        store.set_vc_limits(batch, "cv-101", {"default": {"max_gpus": 2}, "groups": {}, "users": {}}, 1.0, "carol")
    with store.begin() as batch:
        store.set_vc_limits(batch, "cv-101", {"default": {}, "groups": {}, "users": {"ann": {"max_gpus": 1}}}, 2.0, "carol")
        store.set_vc_limits(batch, "other", {"default": {"max_kernels": 1}, "groups": {}, "users": {}}, 2.0, "carol")
    assert store.vc_limits() == {"cv-101": {"default": {}, "groups": {}, "users": {"ann": {"max_gpus": 1}}},
                                 "other": {"default": {"max_kernels": 1}, "groups": {}, "users": {}}}
    store.close()


def test_event_seqs_grow_across_reopens_and_are_never_reused(tmp_path):
    """A state change's id is its ``seq`` on the events websocket: committed rows learn it (in order, told to
    ``on_events``), a reopened store goes on after it, and deleting the newest rows does not hand their
    numbers out again (SQLite AUTOINCREMENT, migration 0008)."""
    url = f"sqlite:///{tmp_path / 'e.sqlite'}"
    store = Store(url)
    told = []
    store.on_events = lambda rows: told.extend((r["seq"], r["job_id"], r["state"]) for r in rows)
    with store.begin() as b:
        store.insert_job(b, _job(1, "queued", "ann"))
        for state in ("submitted", "queued", "scheduled"):
            store.add_event(b, "j-000001", state, 1.0, "")
    assert told == [(1, "j-000001", "submitted"), (2, "j-000001", "queued"), (3, "j-000001", "scheduled")]
    assert store.last_event_seq() == 3
    assert [r["seq"] for r in store.events_after(1, limit=5)] == [2, 3]
    assert [r["state"] for r in store.events_after(0, limit=1)] == ["submitted"]
    with store.engine.begin() as conn:  # the newest row is gone (a restored backup, a prune)
        conn.execute(text("delete from job_events where id = 3"))
    store.close()
    store = Store(url)
    with store.begin() as b:
        store.add_event(b, "j-000001", "running", 2.0, "")
    assert [r["seq"] for r in store.events_after(0, limit=10)] == [1, 2, 4]
    store.close()
