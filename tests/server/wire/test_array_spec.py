"""The ``array`` / ``sweep`` fields read into a plan (pure), and the store's guard that releases each
index at most once."""

import pytest
import sqlalchemy

from hive_lab_server.wire.array_spec import MAX_ELEMENTS, all_sweep_params, plan_from, sweep_params
from hive_lab_server.jobs.arrays.views import compact
from hive_lab_server.wire.spec import SpecError
from hive_lab_server.store import Store


def test_array_syntax():
    assert plan_from("0-49%8").indices == tuple(range(50)) and plan_from("0-49%8").throttle == 8
    plan = plan_from("1,3,5-9%2")
    assert plan.indices == (1, 3, 5, 6, 7, 8, 9) and plan.throttle == 2 and plan.sweep is None
    assert plan_from("0-20:5").indices == (0, 5, 10, 15, 20) and plan_from("0-20:5").throttle is None
    assert plan_from("3,1,3").indices == (1, 3)  # ascending, each once
    assert plan_from(f"0-{MAX_ELEMENTS - 1}").count == MAX_ELEMENTS
    with pytest.raises(SpecError, match="at most 10000"):
        plan_from(f"0-{MAX_ELEMENTS}")


def test_sweep_order_is_names_sorted_last_fastest_whatever_the_order_given():
    a = plan_from(None, {"lr": [0.1, 0.01], "bs": [32, 64]})
    b = plan_from(None, {"bs": [32, 64], "lr": [0.1, 0.01]})
    want = [{"bs": 32, "lr": 0.1}, {"bs": 32, "lr": 0.01}, {"bs": 64, "lr": 0.1}, {"bs": 64, "lr": 0.01}]
    assert [a.params(i) for i in range(4)] == [b.params(i) for i in range(4)] == want
    axes = {"c": [1, 2, 3], "a": ["x", "y"], "b": [True, False]}
    assert [sweep_params(axes, i) for i in range(12)] == all_sweep_params(axes)
    assert plan_from("%3", {"lr": [1, 2]}).throttle == 3


def test_compact_indices():
    assert compact([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and compact([4]) == "4" and compact([]) == ""


def test_the_store_refuses_a_second_job_for_one_index(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'hive.db'}")
    row = {"seq": 1, "id": "j-000001", "name": "a[0]", "user": "ann", "vc": "a", "kind": "batch", "state": "queued",
           "reason": "", "priority": 0, "opportunistic": False, "gpus": 0, "gpu_type": None, "spec": {},
           "submitted_at": 0.0, "started_at": None, "finished_at": None, "exit_code": None, "retries": 0,
           "max_retries": 0, "attempt": 0, "working_dir": "/w", "output_dir": "/o", "updated_at": 0.0,
           "stop_intent": None, "stop_reason": "", "owner_groups": [], "user_group": "",
           "array_id": "a-000001", "array_index": 0}
    with store.begin() as batch:
        store.insert_job(batch, row)
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        with store.begin() as batch:
            store.insert_job(batch, {**row, "seq": 2, "id": "j-000002"})
    assert [r["id"] for r in store.array_elements("a-000001")] == ["j-000001"]
    store.close()
