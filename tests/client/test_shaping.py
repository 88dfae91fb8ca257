"""Pure data shaping: REST JSON -> heatmap columns, table rows, VC bars, status lines."""

from datetime import datetime, timezone

import pytest

from hive_lab.format import duration, placement_text, status_line
from hive_lab.widgets.layout import compute_layout
from hive_lab.widgets.shaping import (
    STATE_COLORS, gpu_colors, gpu_state, heatmap_columns, heatmap_legend, job_color, job_rows, merge_job,
    sort_rows, vc_colors, vc_rows,
)

NOW = datetime(2026, 11, 22, 10, 3, 0, tzinfo=timezone.utc)


def test_gpu_states_from_cluster(recorded):
    states = [gpu_state(g) for g in recorded["cluster"]["gpus"]]
    assert states[:2] == ["used", "used"]
    assert states[4] == "reserved"            # node-1 GPU 0
    assert states[11] == "opportunistic"      # node-2 GPU 3
    assert states[13] == "bad"                # node-3 GPU 1
    assert states.count("free") == 11


def test_heatmap_columns_one_row_per_gpu_with_state_colours(recorded):
    cols = heatmap_columns(recorded["cluster"], "state")
    assert len(cols["x"]) == len(recorded["cluster"]["gpus"]) == 16
    assert all(len(v) == 16 for v in cols.values())
    assert cols["color"][0] == STATE_COLORS["used"]
    assert cols["color"][4] == STATE_COLORS["reserved"]
    assert cols["color"][11] == STATE_COLORS["opportunistic"]
    assert cols["color"][13] == STATE_COLORS["bad"]
    assert cols["color"][15] == STATE_COLORS["free"]
    assert cols["job"][0] == "j-000001" and cols["user"][0] == "ann" and cols["vc"][0] == "research"
    # every GPU has its own cell
    assert len({(x, y) for x, y in zip(cols["x"], cols["y"])}) == 16


def test_heatmap_colour_by_vc_and_job(recorded):
    gpus = recorded["cluster"]["gpus"]
    colors, alphas = gpu_colors(gpus, "vc", ["research", "teaching"])
    palette = vc_colors(["research", "teaching"])
    assert colors[0] == palette["research"] and alphas[0] == 1.0        # used by research
    assert colors[4] == palette["teaching"] and alphas[4] == 0.35       # reserved for teaching
    assert colors[13] == STATE_COLORS["bad"]                            # bad stays red
    assert colors[15] == STATE_COLORS["free"]                           # nobody's
    assert palette["research"] != palette["teaching"]
    colors, _ = gpu_colors(gpus, "job")
    assert colors[0] == colors[1] == job_color("j-000001")
    assert colors[11] == job_color("j-000002")
    assert colors[15] == STATE_COLORS["free"]
    with pytest.raises(ValueError, match="colour by must be one of"):
        gpu_colors(gpus, "rainbow")


def test_legend_lists_what_is_shown(recorded):
    cols = heatmap_columns(recorded["cluster"], "state")
    assert [label for label, _ in heatmap_legend(cols, "state")] == ["free", "used", "reserved", "opportunistic", "bad"]
    cols = heatmap_columns(recorded["cluster"], "vc")
    labels = [label for label, _ in heatmap_legend(cols, "vc")]
    assert {"research", "teaching", "free", "bad"} <= set(labels)


def test_layout_groups_by_path_and_keeps_gpus_of_a_node_together(recorded):
    gpus = recorded["cluster"]["gpus"]
    layout = compute_layout(gpus)
    nodes = [b for b in layout.groups if b.is_node]
    assert sorted(b.address for b in nodes) == ["node-0", "node-1", "node-2", "node-3"]
    for box in nodes:
        inside = [i for i, g in enumerate(gpus) if g["node"] == box.address]
        assert all(box.x0 <= layout.x[i] < box.x1 and box.y0 <= layout.y[i] < box.y1 for i in inside)
    racks = [b for b in layout.groups if b.address.startswith("rack-")]
    assert len(racks) == 2
    # node boxes never overlap
    for a in nodes:
        for b in nodes:
            if a is not b:
                assert a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


@pytest.mark.parametrize("nodes,per_node", [(1, 1), (1, 4), (2, 8), (64, 8), (2500, 8)])
def test_layout_is_compact_for_few_and_thousands_of_gpus(nodes, per_node):
    gpus = [{"node": f"n{n}", "index": i, "path": [f"r{n // 32}", f"n{n}", f"s{i // 4}"]}
            for n in range(nodes) for i in range(per_node)]
    layout = compute_layout(gpus)
    assert len({(x, y) for x, y in zip(layout.x, layout.y)}) == len(gpus)
    fill = len(gpus) / (layout.width * layout.height)
    assert fill > 0.4, f"layout wastes space: {layout.width} x {layout.height} for {len(gpus)} GPUs"
    if len(gpus) >= 64:
        assert 1.0 <= layout.width / layout.height <= 4.0


def test_layout_without_path_groups_by_node():
    gpus = [{"node": f"n{n}", "index": i} for n in range(3) for i in range(2)]
    layout = compute_layout(gpus)
    assert sorted(b.address for b in layout.groups) == ["n0", "n1", "n2"]


def test_job_rows_and_sorting(recorded):
    rows = job_rows(recorded["jobs"]["jobs"], me="ann", now=NOW)
    by_id = {r["id"]: r for r in rows}
    assert by_id["j-000001"]["reason"] == "on node-0 GPU 0,1"
    assert by_id["j-000003"]["reason"].startswith("VC research is using 8/8")
    assert by_id["j-000002"]["priority"] == "opportunistic"
    assert by_id["j-000002"]["gpus"] == "1 A100 GPU"
    assert by_id["j-000003"]["age"] == "1 min 00 s"
    assert by_id["j-000001"]["cancellable"] and not by_id["j-000002"]["cancellable"]  # bob's
    assert not by_id["j-000004"]["cancellable"]  # finished
    assert [r["id"] for r in sort_rows(rows, "gpus", descending=True)][:1] == ["j-000003"]
    assert [r["id"] for r in sort_rows(rows, "state")][-1] == "j-000004"
    assert [r["id"] for r in sort_rows(rows, "user")][-1] == "j-000002"
    with pytest.raises(ValueError):
        sort_rows(rows, "colour")
    admin_rows = job_rows(recorded["jobs"]["jobs"], me="root", admin=True, now=NOW)
    assert {r["id"] for r in admin_rows if r["cancellable"]} == {"j-000001", "j-000002", "j-000003"}


def test_merge_job_event(recorded):
    jobs = recorded["jobs"]["jobs"]
    merged = merge_job(jobs, {"id": "j-000003", "state": "running", "reason": None})
    assert [j["id"] for j in merged] == [j["id"] for j in jobs]
    assert merged[2]["state"] == "running" and merged[2]["name"] == "big"
    assert merge_job(jobs, {"id": "j-000009", "state": "queued"})[0]["id"] == "j-000009"


def test_vc_rows(recorded):
    rows = {r["name"]: r for r in vc_rows(recorded["vcs"]["vcs"])}
    r = rows["research"]
    assert (r["guaranteed"], r["used"], r["borrowed"], r["doomed"], r["queue"]) == (8, 2, 1, 1, 2)
    assert r["used_pct"] == 25.0 and r["borrowed_pct"] == 12.5 and r["guaranteed_pct"] == 100.0
    assert r["summary"] == "2/8 guaranteed GPUs used, 1 opportunistic, 1 bad; 1 running, 2 queued"
    assert rows["teaching"]["free"] == 4 and not rows["teaching"]["mine"]


def test_status_lines(recorded):
    jobs = {j["id"]: j for j in recorded["jobs"]["jobs"]}
    assert status_line(jobs["j-000001"], NOW) == "j-000001 train: running on node-0 GPU 0,1 for 2 min 58 s"
    assert status_line(jobs["j-000003"], NOW) == (
        "j-000003 big: queued for 1 min 00 s — VC research is using 8/8 guaranteed GPUs; 1 job ahead")
    assert status_line(jobs["j-000004"], NOW) == "j-000004 eval: failed (exit code 3) after 1 min 05 s — exit code 3"
    assert placement_text([{"node": "a", "gpus": [0, 1, 2, 3]}, {"node": "b", "gpus": []}]) == "a GPU 0-3; b (no GPU)"
    # halves round up, as the extension does (tests/client/test_one_voice.py)
    assert duration(None) == "-" and duration(3.25) == "3.3 s" and duration(7300) == "2 h 01 min"
