"""A shared GPU in the user-side views: heatmap strips per share (who holds each), `0.25 GPU` in rows."""

from hive_lab.tables import jobs_table
from hive_lab.widgets.heatmap import HeatmapView
from hive_lab.widgets.layout import compute_layout
from hive_lab.widgets.shaping import job_color, job_rows, share_columns

CLUSTER = {"gpus": [
    {"node": "ws", "index": 0, "state": "used", "vc": "cv-101", "job": "j-1", "user": "ann", "path": ["ws"],
     "shares": [{"job": "j-1", "user": "ann", "slot": 0, "share": 0.25, "utilization": 40},
                {"job": "j-2", "user": "bob", "slot": 4, "share": 0.5}], "free_share": 0.25},
    {"node": "ws", "index": 1, "state": "used", "vc": "cv-101", "job": "j-3", "user": "cy", "path": ["ws"]},
]}


def test_a_shared_gpu_is_drawn_as_its_shares_in_their_eighths():
    layout = compute_layout(CLUSTER["gpus"])
    cols = share_columns(CLUSTER, layout)
    assert cols["job"] == ["j-1", "j-2"] and cols["user"] == ["ann", "bob"]
    assert cols["share"] == ["0.25 GPU", "0.5 GPU"] and cols["color"] == [job_color("j-1"), job_color("j-2")]
    x0 = layout.x[0]
    # strips inside the GPU's 0.9-wide cell: j-1 on eighths 0-1, j-2 on eighths 4-7
    assert abs(cols["x"][0] - (x0 + 0.05 + 0.225 / 2)) < 1e-9 and abs(cols["x"][1] - (x0 + 0.05 + 0.45 + 0.225)) < 1e-9
    assert cols["w"][1] > cols["w"][0] and set(cols["gpu"]) == {"ws GPU 0"}
    assert cols["util"] == ["40%", ""]  # each share's own GPU utilisation, where NVML gives it


def test_heatmap_widget_carries_the_share_strips():
    view = HeatmapView(client=None, live=False, cluster=CLUSTER)
    assert view.shares.data["job"] == ["j-1", "j-2"]


def test_rows_and_the_cli_table_say_a_quarter_gpu():
    jobs = [{"id": "j-1", "state": "running", "gpus": 0.25, "vc": "cv-101", "user": "ann"},
            {"id": "j-3", "state": "running", "gpus": 2, "gpu_type": "A100", "vc": "cv-101", "user": "cy"}]
    rows = job_rows(jobs)
    assert [r["gpus"] for r in rows] == ["0.25 GPU", "2 A100 GPUs"] and rows[0]["gpus_n"] == 0.25
    from rich.console import Console
    console = Console(width=160, record=True)
    console.print(jobs_table(jobs))
    assert "0.25 GPU" in console.export_text()
