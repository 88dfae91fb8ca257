"""The simulator's input formats: the events JSONL script and the CSV traces."""

from __future__ import annotations

import collections
import json
import pathlib

import pytest

from hive_scheduler.sim.events import (
    EventError,
    FinishEvent,
    GpuEvent,
    NodeEvent,
    ReconfigureEvent,
    SubmitEvent,
    TaskSpec,
    dump_events,
    load_events,
    parse_events,
)
from hive_scheduler.sim import samples
from hive_scheduler.sim.shape import cluster_shape
from hive_scheduler.sim.trace import assign_vc, load_trace, trace_to_events

PHILLY_DEV = pathlib.Path(samples.PHILLY_DEV)

SUBMIT = (
    '{"t":0,"op":"submit","job":"j1","vc":"VC1","priority":0,"user":"ann","tasks":[{"name":"worker","count":2,'
    '"gpus":4,"gpu_type":"V100","cpus":8,"memory_mb":32768}],"within":"DGX1-NODE","pinned_cell":null,'
    '"lazy_preemption":true,"duration":3600}'
)


def test_every_op_of_the_contract_parses():
    events = parse_events(
        [
            SUBMIT,
            '{"t":10,"op":"finish","job":"j1"}',
            "",
            "# a comment",
            '{"t":20,"op":"node_down","node":"n1"}',
            '{"t":21,"op":"node_up","node":"n1"}',
            '{"t":25,"op":"gpu_down","node":"n1","gpu":3}',
            '{"t":26,"op":"gpu_up","node":"n1","gpu":3}',
            '{"t":30,"op":"reconfigure","cluster":"new.yaml"}',
        ]
    )
    sub = events[0]
    assert sub == SubmitEvent(
        t=0, job="j1", vc="VC1", priority=0, user="ann",
        tasks=(TaskSpec(name="worker", count=2, gpus=4, gpu_type="V100", cpus=8, memory_mb=32768),),
        within="DGX1-NODE", pinned_cell=None, lazy_preemption=True, duration=3600,
    )
    assert sub.gpus == 8 and sub.line == 1
    assert events[1] == FinishEvent(t=10, job="j1")
    assert events[2] == NodeEvent(t=20, node="n1", up=False) and events[2].op == "node_down"
    assert events[3].op == "node_up" and events[3].line == 6
    assert events[4] == GpuEvent(t=25, node="n1", gpu=3, up=False)
    assert events[5].op == "gpu_up"
    assert isinstance(events[6], ReconfigureEvent) and events[6].cluster == "new.yaml"


def test_optional_submit_fields_have_defaults():
    (ev,) = parse_events(['{"t":1.5,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":1,"gpus":0}]}'])
    assert (ev.priority, ev.user, ev.within, ev.pinned_cell, ev.lazy_preemption, ev.duration) == (
        0, "", None, None, True, None,
    )
    assert ev.tasks[0].cpus == 0 and ev.tasks[0].gpu_type is None


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"t":0,"op":"launch","job":"a"}', "'op' must be one of"),
        ('{"t":0,"op":"finish"}', "missing field(s) job"),
        ('{"t":0,"op":"finish","job":"a","jbo":1}', "unknown field(s) jbo"),
        ('{"t":-1,"op":"finish","job":"a"}', "'t' must be a number of seconds >= 0"),
        ('{"t":"5","op":"finish","job":"a"}', "'t' must be a number"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","tasks":[]}', "'tasks' must be a non-empty list"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":0,"gpus":1}]}', "tasks[0]: 'count' must be an integer >= 1"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":1,"gpus":1.5}]}', "'gpus' must be an integer >= 0"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":1,"gpus":1,"gpu":2}]}', "tasks[0]: unknown field(s) gpu"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","priority":"high","tasks":[{"name":"w","count":1,"gpus":1}]}', "'priority' must be an integer"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","duration":0,"tasks":[{"name":"w","count":1,"gpus":1}]}', "'duration' must be a number of seconds > 0"),
        ('{"t":0,"op":"submit","job":"a","vc":"v","lazy_preemption":"no","tasks":[{"name":"w","count":1,"gpus":1}]}', "'lazy_preemption' must be true or false"),
        ('{"t":0,"op":"submit","job":"","vc":"v","tasks":[{"name":"w","count":1,"gpus":1}]}', "'job' must be a non-empty string"),
        ('{"t":0,"op":"gpu_down","node":"n1","gpu":-1}', "'gpu' must be a GPU index >= 0"),
        ('{"t":0,"op":"reconfigure","cluster":""}', "'cluster' must be"),
    ],
)
def test_bad_lines_are_named_with_their_line_number(line, message):
    with pytest.raises(EventError) as info:
        parse_events(['{"t":0,"op":"submit","job":"x","vc":"v","tasks":[{"name":"w","count":1,"gpus":1}]}', line],
                     source="e.jsonl")
    assert info.value.errors[0][0] == 2
    assert str(info.value).startswith("e.jsonl line 2: ")
    assert message in str(info.value)


def test_time_must_not_go_back_and_job_ids_are_unique():
    with pytest.raises(EventError) as info:
        parse_events(
            [
                '{"t":5,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":1,"gpus":1}]}',
                '{"t":4,"op":"finish","job":"a"}',
                '{"t":6,"op":"submit","job":"a","vc":"v","tasks":[{"name":"w","count":1,"gpus":1}]}',
            ]
        )
    lines = [line for line, _ in info.value.errors]
    assert lines == [2, 3]
    assert "goes back in time" in str(info.value)
    assert 'job id "a" was already submitted on line 1' in str(info.value)


def test_finish_must_name_a_submitted_job():
    with pytest.raises(EventError, match=r'line 1: finish: job "ghost" is not submitted on an earlier line'):
        parse_events(['{"t":0,"op":"finish","job":"ghost"}'])


def test_all_errors_are_reported_not_just_the_first(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(["{", '{"t":0}', '{"t":0,"op":"node_down","node":"ok"}', "oops"]) + "\n")
    with pytest.raises(EventError) as info:
        load_events(path)
    assert [line for line, _ in info.value.errors] == [1, 2, 4]
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(EventError, match="file not found"):
        load_events(tmp_path / "nope.jsonl")


def test_dump_and_load_round_trip(tmp_path):
    events = parse_events([SUBMIT, '{"t":10,"op":"finish","job":"j1"}', '{"t":30,"op":"gpu_down","node":"n1","gpu":3}'])
    path = tmp_path / "e.jsonl"
    dump_events(events, path)
    assert load_events(path) == events
    assert json.loads(path.read_text().splitlines()[0]) == json.loads(SUBMIT)


def test_reconfigure_path_resolves_next_to_the_event_file(tmp_path):
    (tmp_path / "new.yaml").write_text("nodes: 1\n")
    path = tmp_path / "e.jsonl"
    path.write_text('{"t":0,"op":"reconfigure","cluster":"new.yaml"}\n{"t":1,"op":"reconfigure","cluster":"philly"}\n')
    first, second = load_events(path)
    assert first.resolved_cluster() == str(tmp_path / "new.yaml")
    assert second.resolved_cluster() == "philly"


# --- traces --------------------------------------------------------------------------------------------

def _cluster(vc_nodes: dict[str, int], gpus_per_node: int = 8) -> dict:
    """A HiveD-form cluster: one rack of nodes, each VC guaranteed ``n`` whole nodes."""
    total = sum(vc_nodes.values())
    return {
        "physicalCluster": {
            "cellTypes": {
                "G-NODE": {"childCellType": "G", "childCellNumber": gpus_per_node, "isNodeLevel": True},
                "G-RACK": {"childCellType": "G-NODE", "childCellNumber": total},
            },
            "physicalCells": [{"cellType": "G-RACK", "cellChildren": [{"cellAddress": f"n{i}"} for i in range(total)]}],
        },
        "virtualClusters": {
            vc: {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": n}]} for vc, n in vc_nodes.items()
        },
    }


def test_cluster_shape_counts_nodes_gpus_and_vc_guarantees():
    shape = cluster_shape(_cluster({"big": 3, "small": 1}))
    assert [n.name for n in shape.nodes] == ["n0", "n1", "n2", "n3"]
    assert shape.total_gpus == 32 and shape.max_gpus_per_node() == 8
    assert shape.vc_total("big") == 24 and shape.vc_total("small") == 8


def test_trace_rows_become_submit_events():
    shape = cluster_shape(_cluster({"a": 2, "b": 2}))
    csv_text = (
        "job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status\n"
        "1,0,100,1,,,,\n"
        "2,5,60,16,,b,bob,Pass\n"
        "3,5,7.5,12,G,,,\n"
    )
    e1, e2, e3 = trace_to_events(csv_text.splitlines(keepends=True), shape)
    assert e1.job == "1" and e1.t == 0 and e1.duration == 100 and e1.priority == 0
    assert e1.tasks == (TaskSpec(name="worker", count=1, gpus=1),)
    assert e1.user == "" and e1.vc in ("a", "b")
    assert e2.vc == "b" and e2.user == "bob"
    assert e2.tasks == (TaskSpec(name="worker", count=2, gpus=8),)
    assert e3.tasks == (
        TaskSpec(name="worker", count=1, gpus=8, gpu_type="G"),
        TaskSpec(name="worker-rest", count=1, gpus=4, gpu_type="G"),
    )
    assert e3.duration == 7.5 and e3.gpus == 12


def test_vc_assignment_is_stable_and_proportional_to_guaranteed_gpus():
    sizes = {"big": 48, "small": 16}
    picks = collections.Counter(assign_vc(f"job-{i}", 1, sizes) for i in range(8000))
    assert abs(picks["big"] / 8000 - 0.75) < 0.03
    assert [assign_vc(f"job-{i}", 1, sizes) for i in range(50)] == [assign_vc(f"job-{i}", 1, sizes) for i in range(50)]
    # a job bigger than a VC never lands there
    assert {assign_vc(f"job-{i}", 32, sizes) for i in range(200)} == {"big"}


@pytest.mark.parametrize(
    "row, message",
    [
        ("9,0,100,0,,,,", "'num_gpus' must be >= 1"),
        ("9,0,100,1.5,,,,", "'num_gpus' must be a whole number"),
        ("9,0,-3,1,,,,", "'duration_s' must be > 0"),
        ("9,x,3,1,,,,", "'submit_time_s' must be a number"),
        ("1,0,3,1,,,,", "job_id '1' already appeared on line 2"),
        ("9,-1,3,1,,,,", "'submit_time_s' must be >= 0"),
    ],
)
def test_bad_trace_rows_are_named(row, message):
    shape = cluster_shape(_cluster({"a": 1}))
    text = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status\n1,0,10,1,,,,\n" + row + "\n"
    with pytest.raises(EventError) as info:
        trace_to_events(text.splitlines(keepends=True), shape, source="t.csv")
    assert str(info.value).startswith("t.csv line 3: ")
    assert message in str(info.value)


def test_unsorted_trace_is_refused():
    text = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status\n1,10,10,1,,,,\n2,5,10,1,,,,\n"
    with pytest.raises(EventError, match="line 3: 'submit_time_s' goes back in time"):
        trace_to_events(text.splitlines(keepends=True), cluster_shape(_cluster({"a": 1})))


def test_trace_header_is_checked():
    with pytest.raises(EventError, match="missing column"):
        trace_to_events(["id,t\n", "1,0\n"], cluster_shape(_cluster({"a": 1})))


def test_philly_dev_slice_loads_with_the_11_vc_split(tmp_path):
    slice_path = tmp_path / "philly-slice.csv"
    with open(PHILLY_DEV) as fh:
        slice_path.write_text("".join(line for _, line in zip(range(301), fh)))
    nodes = [64, 64, 64, 32, 32, 32, 16, 16, 16, 8, 8]
    shape = cluster_shape(_cluster({f"vc{i:02d}": n for i, n in enumerate(nodes)}))
    events = load_trace(slice_path, shape)
    assert len(events) == 300
    assert all(ev.duration > 0 and ev.gpus >= 1 for ev in events)
    assert [ev.t for ev in events] == sorted(ev.t for ev in events)
    assert load_trace(slice_path, shape) == events
    assert len({ev.vc for ev in events}) >= 8
