"""The ipywidgets views fed by a REAL server and its event stream."""


from bokeh.models import GlyphRenderer, Rect

from hive_lab.widgets import Dashboard, HeatmapView, QueueView, VCUsageView
from hive_lab.widgets.shaping import STATE_COLORS
from waiting import wait_until


def test_views_follow_the_event_stream(ann):
    queue = QueueView(ann)
    heatmap = HeatmapView(ann)
    vcs = VCUsageView(ann)
    try:
        # the GPU cells' renderer (a set: the share strips are Rects too)
        rect = next(r for r in heatmap.model._document.select({"type": GlyphRenderer})
                    if isinstance(r.glyph, Rect) and r.data_source is heatmap.source)
        assert len(rect.data_source.data["x"]) == 4
        wait_until(lambda: heatmap.source.data["color"].count(STATE_COLORS["free"]) == 4, ignoring=(Exception,))
        job = ann.submit({"name": "w", "vc": "default", "command": "sleep 30",
                          "tasks": [{"name": "main", "count": 1, "gpus": 2}]})
        # the queue gets the job from the event stream, the heatmap and VC bars refetch (debounced)
        wait_until(lambda: {r["id"]: r["state"] for r in queue.rows}.get(job["id"]) == "running", ignoring=(Exception,))
        assert job["id"] in queue.cancel_buttons
        wait_until(lambda: heatmap.source.data["color"].count(STATE_COLORS["used"]) == 2, ignoring=(Exception,))
        used = [i for i, j in enumerate(heatmap.source.data["job"]) if j == job["id"]]
        assert len(used) == 2 and all(heatmap.source.data["user"][i] == "ann" for i in used)
        wait_until(lambda: {r["name"]: r["used"] for r in vcs.rows}["default"] == 2, ignoring=(Exception,))
        # the cancel button cancels, and the view shows it
        queue.cancel_buttons[job["id"]].click()
        wait_until(lambda: {r["id"]: r["state"] for r in queue.rows}[job["id"]] == "cancelled", ignoring=(Exception,))
        wait_until(lambda: heatmap.source.data["color"].count(STATE_COLORS["free"]) == 4, ignoring=(Exception,))
        # details on click
        queue.show_details(job["id"])
        assert "cancelled" in queue.details.value
        # refetches were debounced, not one per event
        assert heatmap._debouncer.runs <= 8
    finally:
        for view in (queue, heatmap, vcs):
            view.stop()


def test_dashboard_builds(ann):
    dash = Dashboard(ann)
    try:
        assert "you are <b>ann</b>" in dash.header.value and "of 4 GPUs free" in dash.header.value
        assert [r["name"] for r in dash.vcs.rows] == ["default", "other"]
        assert len(dash.heatmap.source.data["x"]) == 4
    finally:
        dash.stop()
