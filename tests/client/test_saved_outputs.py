"""What a notebook using %%submit saves: executed by REAL nbconvert (a real kernel) against a REAL
server, then read back from the .ipynb the way JupyterLab reopens it."""

import json
import subprocess
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

WAIT_CELL = "%%submit --wait --name saved\nfor i in range(60):\n    print('line', i)\n"
FAIL_CELL = "%%submit --wait --name broken\nimport sys\nprint('about to fail', file=sys.stderr)\nsys.exit(3)\n"
BACKGROUND_CELL = "%%submit --name bg\nprint('bg output')\n"
JOIN_CELL = ("m = get_ipython().magics_manager.registry['HiveLabMagics']\n"
             "m.watchers[_.id].join(60)\n")


def execute_with_nbconvert(tmp_path, cells):
    path = tmp_path / "run.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells],
                                metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                         "language": "python"}}), path)
    out = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                          "--ExecutePreprocessor.timeout=120", str(path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb, path.read_text()


def texts(outputs):
    """Every output's plain text, as a reader of the saved file sees it."""
    found = []
    for o in outputs:
        if o["output_type"] == "stream":
            found.append((o["output_type"], o["name"], o["text"]))
        else:
            found.append((o["output_type"], None, o.get("data", {}).get("text/plain", "")))
    return found


def test_wait_puts_the_jobs_output_and_exit_code_into_the_saved_notebook(ann_env, tmp_path):
    nb, raw = execute_with_nbconvert(tmp_path, ["%load_ext hive_lab", WAIT_CELL, FAIL_CELL])
    assert WIDGET_VIEW not in raw and "widget-state" not in raw  # nothing that needs a live kernel
    assert "widgets" not in nb.metadata

    saved = texts(nb.cells[1].outputs)
    streams = "".join(t for kind, name, t in saved if kind == "stream" and name == "stdout")
    assert "line 59\n" in streams and "line 20\n" in streams and "line 19\n" not in streams  # the tail
    assert "20 earlier lines of the log not shown" in streams
    shown = [t for kind, _, t in saved if kind != "stream" and t]
    assert len(shown) == 1 and "saved: succeeded (exit code 0)" in shown[0]  # the result, once
    kinds = [kind for kind, _, t in saved if t]
    assert kinds.index("stream") < len(kinds) - 1 and kinds[-1] != "stream"  # the log, then the result

    saved = texts(nb.cells[2].outputs)
    streams = "".join(t for kind, name, t in saved if kind == "stream")
    assert "about to fail" in streams  # stderr of the job is in its log
    assert any("broken: failed (exit code 3)" in t for kind, _, t in saved if kind != "stream")


def test_without_wait_the_result_follows_the_job_to_its_end(ann_env, tmp_path):
    nb, raw = execute_with_nbconvert(tmp_path, ["%load_ext hive_lab", BACKGROUND_CELL, JOIN_CELL])
    assert WIDGET_VIEW not in raw and "widgets" not in nb.metadata
    outputs = nb.cells[1].outputs
    assert [o["output_type"] for o in outputs] == ["display_data"]  # no frozen Out[] repr
    data = outputs[0]["data"]
    assert "bg: succeeded (exit code 0)" in data["text/plain"]  # updated in place after the cell ended
    assert "bg output" in data["text/plain"] and "bg output" in data["text/html"]
    assert "scheduled" not in json.dumps(outputs)


SWEEP_CELL = (  # the README's sweep, 20 runs at most 4 at once; each waits for the file "go"
    "%%submit --sweep lr=0.1,0.03,0.01,0.003,0.001 --sweep bs=16,32,64,128 --array %4 --name sweep\n"
    "import json, os, pathlib, time\n"
    "go = pathlib.Path({go!r})\n"
    "while not go.exists():\n"
    "    time.sleep(0.05)\n"
    "lr, bs = float(os.environ['HIVE_PARAM_LR']), int(os.environ['HIVE_PARAM_BS'])\n"
    "json.dump({'loss': (lr - 0.05) ** 2 + 1 / bs}, open(os.environ['HIVE_OUTPUT_DIR'] + '/metrics.json', 'w'))\n"
)
GO_AND_JOIN_CELL = (  # the sweep cell has ended with its elements waiting; only now may they finish
    "import pathlib\n"
    "assert _.info['state'] != 'ended', _.info\n"
    "pathlib.Path(GO).touch()\n"
    "m = get_ipython().magics_manager.registry['HiveLabMagics']\n"
    "m.watchers[_.id].join(240)\n"
    "assert not m.watchers[_.id].is_alive()\n"
)


def test_an_array_cell_follows_its_elements_to_the_end_and_saves_the_table_and_charts(ann_env, tmp_path):
    from hive_lab.widgets.lab_views import VIEW_MIME

    go = tmp_path / "go"
    tmp_path.chmod(0o777)  # the elements may run as another account
    cells = ["%load_ext hive_lab", f"GO = {str(go)!r}", SWEEP_CELL.replace("{go!r}", repr(str(go))), GO_AND_JOIN_CELL,
             "_.show_results()"]
    nb, raw = execute_with_nbconvert(tmp_path, cells)
    assert WIDGET_VIEW not in raw and "widgets" not in nb.metadata  # nothing that needs a live kernel
    assert "Traceback" not in raw and "error" not in [o["output_type"] for c in nb.cells for o in c.outputs]
    outputs = nb.cells[2].outputs
    assert [o["output_type"] for o in outputs] == ["display_data"]  # one display, updated in place
    data = outputs[0]["data"]
    first, header, *rows = data["text/plain"].splitlines()
    assert "[20 elements, at most 4 at once]: ended: 20 succeeded" in first and "as of" not in first
    assert header.split() == ["index", "bs", "lr", "state", "duration", "loss", "job_id"]
    assert len(rows) == 20 and all("succeeded" in r for r in rows)
    losses = [float(r.split()[-2]) for r in rows]
    assert losses == sorted(losses) and losses[0] == 0.008213  # (0.03-0.05)^2 + 1/128 = 0.0082125, to 4 digits
    assert data["text/html"].count("<tr>") == 21 and ">loss</th>" in data["text/html"]
    view = data[VIEW_MIME]
    assert view["view"] == "array" and view["ended"] is True and json.loads(view["chart"])["doc"]  # Bokeh's charts
    shown = nb.cells[4].outputs  # show_results(): the same display, no widget
    assert [o["output_type"] for o in shown] == ["display_data"]
    assert shown[0]["data"]["text/plain"] == data["text/plain"] and shown[0]["data"][VIEW_MIME]["view"] == "array"
