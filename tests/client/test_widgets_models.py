"""Widget models built from recorded JSON carry the right data (the live versions: test_live_*)."""

from datetime import datetime, timezone

import ipywidgets as W
from bokeh.models import GlyphRenderer, Rect

from hive_lab.widgets import HeatmapView, JobMonitor, QueueView, VCUsageView
from hive_lab.widgets.shaping import STATE_COLORS, vc_colors


def _texts(grid):
    return [c.description if isinstance(c, W.Button) else c.value for c in grid.children]


# The recorded jobs were submitted between 09:00 and 10:02 that day; ages are taken against this clock.
RECORDED_NOW = datetime(2026, 11, 22, 10, 5, tzinfo=timezone.utc)


def test_queue_view_rows_buttons_and_sorting(recorded):
    view = QueueView(None, jobs=recorded["jobs"]["jobs"], me={"user": "ann", "admin": False}, live=False,
                     clock=lambda: RECORDED_NOW)
    # by state (running, queued, failed), newest first inside a state
    assert [r["id"] for r in view.rows] == ["j-000002", "j-000001", "j-000003", "j-000004"]
    assert {r["id"]: r["age"] for r in view.rows}["j-000004"] == "1 h 05 min"
    assert set(view.cancel_buttons) == {"j-000001", "j-000003"}   # ann's unfinished jobs only
    texts = _texts(view.grid)
    assert texts[0].startswith("job") and any("VC research is using 8/8" in t for t in texts)
    assert "4 of my jobs" in view.title.value
    view.sort_by("gpus")
    view.sort_by("gpus")  # second click: descending
    assert view.rows[0]["id"] == "j-000003" and view.header_buttons["gpus"].description.endswith("▼")
    # a job event updates the row in place
    view.on_event({"type": "job", "job": {"id": "j-000003", "user": "ann", "state": "running",
                                          "placement": [{"node": "node-1", "gpus": [0]}]}})
    assert {r["id"]: r["state"] for r in view.rows}["j-000003"] == "running"
    # other users' events are ignored in the "mine" view
    view.on_event({"type": "job", "job": {"id": "j-000099", "user": "bob", "state": "queued"}})
    assert "j-000099" not in {r["id"] for r in view.rows}


def test_vc_usage_view(recorded):
    view = VCUsageView(None, vcs=recorded["vcs"]["vcs"], live=False)
    assert [r["name"] for r in view.rows] == ["research", "teaching"]
    html = [c.value for c in view.table.children]
    assert "2/8 guaranteed GPUs used, 1 opportunistic, 1 bad; 1 running, 2 queued" in html
    assert "width:25.0%" in html[1] and "width:12.5%" in html[1]   # used, borrowed
    assert "3 GPUs in use, 12 guaranteed" in view.title.value


def test_heatmap_document_has_one_glyph_per_gpu_with_state_colours(recorded):
    view = HeatmapView(None, cluster=recorded["cluster"], live=False)
    doc = view.model._document
    rects = [r for r in doc.select({"type": GlyphRenderer}) if isinstance(r.glyph, Rect)]
    assert len(rects) == 2  # the GPUs, and the strips of shared GPUs' shares (none here)
    rects = [r for r in rects if r.data_source is view.source]
    assert not view.shares.data["job"]
    data = rects[0].data_source.data
    assert len(data["x"]) == 16
    assert data["color"][:2] == [STATE_COLORS["used"]] * 2
    assert data["color"][13] == STATE_COLORS["bad"] and data["color"][11] == STATE_COLORS["opportunistic"]
    assert data["color"].count(STATE_COLORS["free"]) == 11
    # hover names the GPU's job, user and VC
    from bokeh.models import HoverTool

    [hover] = [h for h in view.figure.select({"type": HoverTool}) if view.renderer in h.renderers]
    assert {"job", "user", "VC", "state"} <= {label for label, _ in hover.tooltips}
    # the bundle the browser receives carries the same source
    assert view.model.render_bundle["docs_json"]
    view.mode.value = "vc"
    palette = vc_colors(["research", "teaching"])
    assert rects[0].data_source.data["color"][0] == palette["research"]
    assert "research" in view.legend.value and "11 of 16" not in view.legend.value
    assert "11 of 16 GPUs free" in view.status.value


def test_heatmap_offers_the_lab_heatmaps_colour_modes(recorded):
    """Every mode the Lab heatmap offers (labextension/src/heatmap.ts) works here too."""
    import pathlib
    import re

    lab = (pathlib.Path(__file__).parents[2] / "labextension" / "src" / "heatmap.ts").read_text()
    lab_modes = re.findall(r"\{ value: '(\w+)', label:", lab)
    assert "user" in lab_modes
    for mode in lab_modes:
        view = HeatmapView(None, cluster=recorded["cluster"], color_by=mode, live=False)
        assert len(view.source.data["color"]) == 16
    view = HeatmapView(None, cluster=recorded["cluster"], color_by="user", live=False)
    users = view.source.data["user"]
    colors = view.source.data["color"]
    ann = {c for u, c in zip(users, colors) if u == "ann"}
    assert len(ann) == 1 and ann != {STATE_COLORS["free"]}
    assert "ann" in view.legend.value
    assert set(view.mode.options) == set(lab_modes)


def test_heatmap_readable_for_thousands_of_gpus():
    gpus = [{"node": f"n{n}", "index": i, "state": "used" if (n + i) % 3 == 0 else "free", "vc": "a",
             "path": [f"r{n // 40}", f"n{n}", f"s{i // 4}"]} for n in range(1250) for i in range(8)]
    view = HeatmapView(None, cluster={"gpus": gpus, "gpus_total": 10000, "gpus_free": 0}, live=False)
    assert len(view.source.data["x"]) == 10000
    assert view.figure.width <= 960 and 60 < view.figure.height <= 720
    assert len(view.outlines.data["left"]) <= 600


def test_job_monitor_keeps_a_tail(recorded):
    monitor = JobMonitor(tail_lines=3)
    monitor.update(recorded["jobs"]["jobs"][2])
    html = monitor.bundle()["text/html"]
    assert "queued" in html and "8/8 guaranteed" in html and "queued" in monitor.bundle()["text/plain"]
    monitor.append_log("a\nb\n")
    monitor.append_log("c\nd\ne\n")
    assert monitor.log_text.splitlines() == ["c", "d", "e"]
    assert monitor.tail.dropped == 2 and "e" in monitor.bundle()["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" not in monitor.bundle()


def test_a_saved_status_says_when_it_was_true(recorded):
    """A job's display in a notebook saved while the job ran, reopened later, must not claim "running"
    as if now: it carries "as of <time>" until the job has ended (issue 30)."""
    from datetime import datetime, timezone

    from hive_lab.format import when_text

    at = datetime(2026, 3, 1, 9, 30, 5, tzinfo=timezone.utc)
    monitor = JobMonitor(wall_clock=lambda: at)
    job = dict(recorded["jobs"]["jobs"][2])  # queued
    monitor.update(job)
    bundle = monitor.bundle()
    stamp = f"as of {when_text(at)}"  # local time with its zone, as every surface says times
    assert bundle["text/plain"].splitlines()[0].endswith(f"({stamp})")
    assert stamp in bundle["text/html"] and "◷" in bundle["text/html"]
    monitor.update(dict(job, state="succeeded", exit_code=0, reason=None))
    assert "as of" not in monitor.bundle()["text/plain"]  # the final state is true for ever


def test_a_saved_log_tail_of_a_running_job_says_the_log_goes_on(recorded):
    """Issue 9: a notebook reopened later showed the tail it was saved with as if it were the whole log;
    while the job runs the tail ends with 'log continues: hive-lab logs J' (the cell view's words)."""
    from datetime import datetime, timezone

    from hive_lab.widgets.job_monitor import job_bundle

    at = datetime(2026, 3, 1, 9, 30, 5, tzinfo=timezone.utc)
    job = dict(recorded["jobs"]["jobs"][0], state="running")
    bundle = job_bundle(job, "step 1\nstep 2\n", as_of=at)
    more = f"log continues: hive-lab logs {job['id']}"
    assert bundle["text/plain"].splitlines()[-1] == more
    assert f'<div class="hive-log-continues"' in bundle["text/html"] and more in bundle["text/html"]
    ended = job_bundle(dict(job, state="succeeded", exit_code=0), "step 1\nstep 2\n", as_of=at)
    assert "log continues" not in ended["text/plain"]  # an ended job's tail is all it will write
    assert "log continues" not in job_bundle(job, "", as_of=at)["text/plain"]  # no tail, nothing cut
