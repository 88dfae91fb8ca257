"""Gavel's throughput JSON, Gavel's trace format and the GPU cluster forms of the round-based simulator."""

from __future__ import annotations

import json
import pathlib

import pytest

from hive_scheduler.hetero import (
    ClusterSpecError, ThroughputError, TraceError, load_gpu_cluster, load_throughputs, load_trace,
    parse_short_form,
)
from hive_scheduler.hetero.cluster import from_hived_config
from hive_scheduler.hetero.throughputs import parse_throughputs
from hive_scheduler.hetero.trace import parse_trace_lines

DATA = pathlib.Path(__file__).resolve().parents[2] / "scheduler" / "hive_scheduler" / "hetero" / "data"


def test_shipped_throughputs_are_gavels_with_case_insensitive_gpu_names():
    t = load_throughputs()
    assert {"v100", "p100", "k80"} <= set(t.gpu_types)
    assert len([k for k in t.job_types() if k[1] == 1]) == 26  # Gavel's 26 job types
    assert t.get("ResNet-50 (batch size 64)", 1, "V100") == t.get("ResNet-50 (batch size 64)", 1, "v100") > 0
    # V100 is faster than K80 for ResNet-50, as measured by Gavel
    assert t.get("ResNet-50 (batch size 64)", 1, "v100") > t.get("ResNet-50 (batch size 64)", 1, "k80")
    both = t.pair(("ResNet-18 (batch size 16)", 1), ("ResNet-18 (batch size 16)", 1), "V100")
    assert both is not None and len(both) == 2
    assert (DATA / "LICENSE-gavel-MIT.txt").read_text().startswith("MIT License")


def test_throughput_doc_is_parsed_with_pairs():
    doc = {"V100": {"('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 3.0]}, "('B', 1)": {"null": 4.0}}}
    t = parse_throughputs(doc, "mem")
    assert t.gpu_types == ["v100"]
    assert t.get("A", 1, "v100") == 10.0 and t.get("B", 1, "V100") == 4.0
    assert t.pair(("A", 1), ("B", 1), "v100") == (6.0, 3.0)
    assert t.pair(("B", 1), ("A", 1), "v100") is None


@pytest.mark.parametrize("doc, message", [
    ({"v100": {"A": {"null": 1}}}, "is not"),
    ({"v100": {"('A', 1)": {"x": 1}}}, '"null"'),
    ({"v100": {"('A', 1)": {"null": -1}}}, ">= 0"),
    ({"v100": {}, "V100": {}}, "twice"),
    ([], "expected an object"),
])
def test_bad_throughput_docs_say_what_is_wrong(doc, message):
    with pytest.raises(ThroughputError, match=message):
        parse_throughputs(doc, "f.json")


def test_missing_job_type_or_gpu_type_is_named():
    t = parse_throughputs({"v100": {"('A', 1)": {"null": 1.0}}}, "f.json")
    with pytest.raises(ThroughputError, match="'A' at scale factor 2"):
        t.get("A", 2, "v100")
    with pytest.raises(ThroughputError, match="GPU type 'a100'"):
        t.get("A", 1, "a100")


def test_unreadable_throughput_file(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    with pytest.raises(ThroughputError, match="not JSON"):
        load_throughputs(str(bad))
    with pytest.raises(ThroughputError, match="No such file"):
        load_throughputs(str(tmp_path / "missing.json"))


def test_gavel_traces_parse():
    small = load_trace(str(DATA / "small_test.trace"))
    assert len(small) == 20 and [j.job_id for j in small] == list(range(20))
    big = load_trace(str(DATA / "minimize_makespan.trace"))
    assert len(big) == 100 and all(j.arrival_time == 0 for j in big)
    first = big[0]
    assert first.job_type == "Transformer (batch size 128)"
    assert (first.total_steps, first.scale_factor, first.priority_weight) == (19605, 1, 1.0)
    assert first.working_directory == "translation" and first.num_steps_arg == "-step"
    t = load_throughputs()
    for j in big:  # every job type of the trace is in the throughput file
        assert t.get(j.job_type, j.scale_factor, "k80") >= 0


def test_nine_field_trace_lines_are_gavels_older_format():
    (job,) = parse_trace_lines(["A\tpython x.py\t--steps\t1\t500\t2\t1\t-1\t30\n"])
    assert (job.job_type, job.total_steps, job.scale_factor, job.arrival_time) == ("A", 500, 2, 30.0)


@pytest.mark.parametrize("line, message", [
    ("A\tcmd\twd\t-s\t1\t100\t1\t1\n", "expected 10 tab-separated fields"),
    ("A\tcmd\twd\t-s\t1\tmany\t1\t1\t-1\t0\n", "total steps 'many' is not an integer"),
    ("A\tcmd\twd\t-s\t1\t100\t0\t1\t-1\t0\n", "scale factor must be >= 1"),
    ("A\tcmd\twd\t-s\t1\t100\t1\t0\t-1\t0\n", "priority weight must be > 0"),
    ("A\tcmd\twd\t-s\t1\t100\t1\t1\t-1\t-5\n", "arrival time must be >= 0"),
])
def test_bad_trace_lines_name_file_line_and_field(line, message):
    with pytest.raises(TraceError, match=message) as info:
        parse_trace_lines(["A\tcmd\twd\t-s\t1\t100\t1\t1\t-1\t0\n", line], "t.trace")
    assert "t.trace:2" in str(info.value)


def test_decreasing_arrivals_and_empty_traces_are_refused():
    with pytest.raises(TraceError, match="must not decrease"):
        parse_trace_lines(["A\tc\tw\t-s\t1\t1\t1\t1\t-1\t10\n", "A\tc\tw\t-s\t1\t1\t1\t1\t-1\t5\n"], "t")
    with pytest.raises(TraceError, match="no jobs"):
        parse_trace_lines(["\n"], "t")


def test_short_form_cluster():
    c = parse_short_form("V100:8, p100:16,k80:24")
    assert c.gpus == {"v100": 8, "p100": 16, "k80": 24}
    assert c.vcs == {"default": c.gpus}
    assert parse_short_form("philly") is None
    with pytest.raises(ClusterSpecError, match="named twice"):
        parse_short_form("v100:8,V100:2")
    with pytest.raises(ClusterSpecError, match="at least 1"):
        parse_short_form("v100:0")


def _mixed_hived_config() -> dict:
    return {
        "physicalCluster": {
            "cellTypes": {
                "V100-NODE": {"childCellType": "V100", "childCellNumber": 4, "isNodeLevel": True},
                "K80-NODE": {"childCellType": "K80", "childCellNumber": 8, "isNodeLevel": True},
            },
            "physicalCells": [
                {"cellType": "V100-NODE", "cellAddress": "v0"},
                {"cellType": "V100-NODE", "cellAddress": "v1"},
                {"cellType": "K80-NODE", "cellAddress": "k0"},
            ],
        },
        "virtualClusters": {
            "a": {"virtualCells": [{"cellType": "V100-NODE", "cellNumber": 1}, {"cellType": "K80-NODE", "cellNumber": 1}]},
            "b": {"virtualCells": [{"cellType": "V100-NODE", "cellNumber": 1}]},
        },
    }


def test_hived_config_gives_gpus_per_type_and_per_vc(tmp_path):
    from hive_scheduler import load_cluster_config

    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(_mixed_hived_config()))
    c = from_hived_config(load_cluster_config(str(path)))
    assert c.gpus == {"v100": 8, "k80": 8}
    assert c.vcs == {"a": {"v100": 4, "k80": 8}, "b": {"v100": 4}}
    assert load_gpu_cluster(str(path)) == c


def test_shipped_isolated_file_holds_the_whole_files_numbers():
    # load_throughputs() reads the shipped file's isolated steps/s from its 26 kB extract and the pairs
    # from the whole file on first use: the same Throughputs as reading the whole file at once
    import json

    from hive_scheduler.hetero.throughputs import BUILTIN, BUILTIN_ISOLATED, _read, isolated_doc

    with open(BUILTIN, encoding="utf-8") as f:
        whole_doc = json.load(f)
    with open(BUILTIN_ISOLATED, encoding="utf-8") as f:
        assert json.load(f) == isolated_doc(whole_doc), (
            "regenerate the extract: json.dump(isolated_doc(json.load(open(BUILTIN))), open(BUILTIN_ISOLATED, 'w'), "
            "separators=(',', ':'))")
    split, whole = load_throughputs(), _read(BUILTIN)
    assert split.isolated == whole.isolated and split.source == whole.source
    keys = whole.job_types()
    for gpu in whole.gpu_types:
        for a in keys[::7]:
            for b in keys[::5]:
                assert split.pair(a, b, gpu) == whole.pair(a, b, gpu)
    assert any(split.pair(a, b, "v100") is not None for a in keys for b in keys)
