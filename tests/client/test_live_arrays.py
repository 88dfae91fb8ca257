"""Job arrays and sweeps from the CLI, ``%%submit`` and the Python client, against a REAL server."""

import json
import re

import pytest

import pandas as pd

from hive_lab.array_results import collect_results
from hive_lab.arrays import JobArray, result_columns
from hive_lab.errors import BadRequest
from hive_lab.sweeps import parse_sweep
from hive_lab.widgets.array_results import array_bundle, results_html
from hive_lab.widgets.lab_views import VIEW_MIME

from test_live_cli import cli


def test_sweep_flags_become_the_sweep_field():
    assert parse_sweep(["lr=0.1,0.01", "bs=32,64", "opt=adam,sgd", "amp=true,false"]) == {
        "lr": [0.1, 0.01], "bs": [32, 64], "opt": ["adam", "sgd"], "amp": [True, False]}
    assert parse_sweep([]) is None
    for bad in (["lr"], ["=1,2"], ["lr="], ["lr=1", "lr=2"]):
        with pytest.raises(BadRequest):
            parse_sweep(bad)


def test_cli_array_is_one_line_in_jobs_lists_its_elements_and_cancels(hive_server):
    out = cli(hive_server, "submit", "--array", "0-5%2", "--json", "--name", "arr", "--gpus", "0", "--",
              "sh", "-c", "sleep 600")
    array = json.loads(out.stdout)
    assert array["count"] == 6 and array["throttle"] == 2
    listing = cli(hive_server, "jobs").stdout
    line = next(ln for ln in listing.splitlines() if array["id"] in ln)
    assert "[6 elements, at most 2 at once]" in line and re.search(r"\d pending", line)
    assert f"arr[0]" not in listing  # its elements are not listed one by one
    listed = json.loads(cli(hive_server, "jobs", "--json").stdout)
    assert array["id"] in [a["id"] for a in listed["arrays"]]
    assert not any(j.get("array_id") for j in listed["jobs"])
    elements = cli(hive_server, "jobs", array["id"]).stdout.splitlines()
    assert elements[0].startswith(array["id"]) and elements[1].split()[:3] == ["index", "state", "duration"]
    assert [ln.split()[0] for ln in elements[2:]] == [str(i) for i in range(6)]  # no metric: by index
    out = cli(hive_server, "cancel", f"{array['id']}[4-5]")
    assert "2 cancelled" in out.stdout
    out = cli(hive_server, "cancel", array["id"])
    assert array["id"] in out.stdout
    shown = json.loads(cli(hive_server, "jobs", array["id"], "--json").stdout)
    assert shown["counts"]["pending"] == 0 and shown["counts"]["cancelled"] >= 4  # the running two are stopping


def test_cli_sweep_waits_and_reports(hive_server):
    out = cli(hive_server, "submit", "--sweep", "lr=0.1,0.01", "--sweep", "bs=32,64", "--array", "%2", "--wait",
              "--json", "--gpus", "0", "--", "sh", "-c", 'test -n "$HIVE_PARAM_LR" && test -f "$HIVE_PARAMS_FILE"')
    array = json.loads(out.stdout)
    assert array["state"] == "ended" and array["counts"]["succeeded"] == 4
    assert "callback failed" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    out = cli(hive_server, "submit", "--sweep", "lr", "--", "true", check=False)
    assert out.returncode != 0 and "--sweep takes NAME=V1,V2" in out.stderr
    out = cli(hive_server, "submit", "--array", "0-3%0", "--", "true", check=False)
    assert out.returncode != 0 and "throttle" in out.stderr



CELL = (
    "import json, os, pathlib\n"
    "p = json.load(open(os.environ['HIVE_PARAMS_FILE']))\n"
    "from hive_lab import progress\n"
    "progress(int(p['bs']) * 10)\n"
    "out = pathlib.Path(os.environ['HIVE_OUTPUT_DIR'])\n"
    "(out / 'metrics.json').write_text(json.dumps({'loss': p['lr'] * p['bs']}))\n"
)


def test_submit_magic_sweep_and_its_results_table(shell, capsys, caplog, monkeypatch):
    array = shell.run_cell_magic("submit", "--sweep lr=0.5,0.25 --sweep bs=2,4 --name mag", CELL)
    assert isinstance(array, JobArray)
    assert re.search(rf"{array.id} mag \[4 elements\]", capsys.readouterr().out)
    array.wait(timeout=120)
    assert array.counts["succeeded"] == 4, array.info
    assert not [r for r in caplog.records if "callback failed" in r.getMessage()]  # every event shape is read

    # a DataFrame (pandas is installed) sorted by the first metric, ties by index
    frame = array.results()
    assert isinstance(frame, pd.DataFrame) and frame.index.name == "index"
    assert list(frame.columns) == ["bs", "lr", "state", "duration_s", "loss", "steps", "job_id"]
    assert list(frame.index) == [1, 0, 3, 2] and list(frame["loss"]) == [0.5, 1.0, 1.0, 2.0]
    assert (frame["state"] == "succeeded").all() and (frame["duration_s"] >= 0).all() and frame["job_id"].all()
    assert list(frame["steps"]) == [20, 20, 40, 40]
    assert list(array.results(sort_by="loss", ascending=False).index) == [2, 0, 3, 1]

    # show_results(): the cell's display (table and charts) for this array, no widget
    shown = array.show_results()
    assert [r["index"] for r in shown.refresh()] == [1, 0, 3, 2]
    bundle = shown._repr_mimebundle_()
    assert bundle[VIEW_MIME]["view"] == "array" and "4 succeeded" in bundle["text/plain"].splitlines()[0]
    assert "application/vnd.jupyter.widget-view+json" not in bundle

    # the same rows as records, as without pandas
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)  # "import pandas" fails from here on
    rows = array.results()
    assert isinstance(rows, list) and [(r["index"], r["bs"], r["lr"], r["loss"]) for r in rows] == [
        (1, 2, 0.25, 0.5), (0, 2, 0.5, 1.0), (3, 4, 0.25, 1.0), (2, 4, 0.5, 2.0)]
    assert result_columns(rows) == ["index", "bs", "lr", "state", "duration_s", "loss", "steps", "job_id"]
    table = results_html(collect_results(array.client, array.id))
    assert table.count("<tr>") == 5 and ">loss</th>" in table and ">duration</th>" in table


def test_results_are_rounded_for_display_and_charted(ann):
    """A sweep of 3 parameters: the table rounds (0.3333, not 0.3333333333333333), the bundle carries the
    Bokeh charts (each metric by each parameter, and parallel coordinates) for the extension."""
    cell = ("import json, os; p = json.load(open(os.environ['HIVE_PARAMS_FILE']))\n"
            "json.dump({'loss': p['a'] / 3, 'acc': 1 - p['b'] / 7},\n"
            "          open(os.environ['HIVE_OUTPUT_DIR'] + '/metrics.json', 'w'))\n")
    array = JobArray(ann, ann.submit_array({"command": f"python3 -c \"{cell}\"", "tasks": [{"gpus": 0}]},
                                           sweep={"a": [1, 2], "b": [1, 2], "opt": ["adam", "sgd"]}))
    array.wait(timeout=120)
    assert array.counts["succeeded"] == 8, array.info
    table = collect_results(ann, array.id)
    assert table.params == ["a", "b", "opt"] and table.metrics == ["loss", "acc"]
    bundle = array_bundle(array.info, table, chart_item_of(table))
    assert "0.3333 " in bundle["text/plain"] and "0.33333" not in bundle["text/plain"] + bundle["text/html"]
    assert "8 succeeded" in bundle["text/plain"].splitlines()[0]
    view = bundle[VIEW_MIME]
    assert view["view"] == "array" and view["id"] == array.id and view["ended"] is True
    names = {r.get("attributes", {}).get("name") for r in walk(json.loads(view["chart"])["doc"])}
    assert {"loss-by-a", "loss-by-b", "loss-by-opt", "acc-by-a", "parallel-coordinates"} <= names


def chart_item_of(table):
    from hive_lab.array_charts import chart_item

    return chart_item(table)


def walk(node):
    """Every dict inside Bokeh's JSON."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def test_cli_jobs_array_prints_the_results_table_with_metrics(hive_server):
    cell = ("import json, os; p = json.load(open(os.environ['HIVE_PARAMS_FILE'])); "
            "json.dump({'loss': 1 / p['x']}, open(os.environ['HIVE_OUTPUT_DIR'] + '/metrics.json', 'w'))")
    out = cli(hive_server, "submit", "--sweep", "x=1,3,2", "--wait", "--json", "--gpus", "0", "--name", "clim", "--",
              "python3", "-c", cell)
    array = json.loads(out.stdout)
    assert array["counts"]["succeeded"] == 3, array
    lines = cli(hive_server, "jobs", array["id"]).stdout.splitlines()
    assert lines[0].startswith(array["id"]) and "3 succeeded" in lines[0]
    assert lines[1].split() == ["index", "x", "state", "duration", "loss", "job_id"]
    rows = [ln.split() for ln in lines[2:]]
    assert [(r[0], r[1], r[-2]) for r in rows] == [("1", "3", "0.3333"), ("2", "2", "0.5"), ("0", "1", "1")]
    shown = json.loads(cli(hive_server, "jobs", array["id"], "--json").stdout)
    assert [r["loss"] for r in shown["results"]] == [1 / 3, 0.5, 1.0]


def test_bokehjs_is_served_to_logged_in_users_only_and_only_its_own_files(hive_server):
    """The extension draws saved charts with the server's BokehJS: served to a logged-in user; nobody
    else gets it, and no other name reaches the file system."""
    import requests

    url = hive_server.url + "hive_lab/static/bokeh/"
    ok = requests.get(url + "bokeh.min.js", headers={"Authorization": f"token {hive_server.tokens['ann']}"},
                      timeout=30)
    assert ok.status_code == 200 and "javascript" in ok.headers["Content-Type"] and "Bokeh" in ok.text[:5000]
    anonymous = requests.get(url + "bokeh.min.js", timeout=30, allow_redirects=False)
    assert anonymous.status_code in (302, 403) and "Bokeh" not in anonymous.text
    for name in ("bokeh.js", "..%2f..%2f__init__.py", "%2e%2e/%2e%2e/server/server.py"):
        r = requests.get(url + name, headers={"Authorization": f"token {hive_server.tokens['ann']}"}, timeout=30)
        assert r.status_code == 404, (name, r.status_code)
