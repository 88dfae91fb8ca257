"""Job arrays and sweeps from the CLI, ``%%submit`` and the Python client, against a REAL server."""

import json
import re

import pytest

from hive_lab.arrays import JobArray, result_columns
from hive_lab.errors import BadRequest
from hive_lab.sweeps import parse_sweep
from hive_lab.widgets.array_results import results_html

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
    assert elements[0].startswith(array["id"]) and [ln.split()[0] for ln in elements[1:]] == [
        f"[{i}]" for i in range(6)]
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


def test_submit_magic_sweep_and_its_results_table(shell, capsys, caplog):
    array = shell.run_cell_magic("submit", "--sweep lr=0.5,0.25 --sweep bs=2,4 --name mag", CELL)
    assert isinstance(array, JobArray)
    assert re.search(rf"{array.id} mag \[4 elements\]", capsys.readouterr().out)
    array.wait(timeout=120)
    assert array.counts["succeeded"] == 4, array.info
    assert not [r for r in caplog.records if "callback failed" in r.getMessage()]  # every event shape is read
    rows = array.results()
    assert [(r["index"], r["bs"], r["lr"], r["loss"]) for r in rows] == [
        (0, 2, 0.5, 1.0), (1, 2, 0.25, 0.5), (2, 4, 0.5, 2.0), (3, 4, 0.25, 1.0)]
    assert all(r["state"] == "succeeded" and r["job_id"] for r in rows)
    assert result_columns(rows)[:5] == ["index", "state", "job_id", "bs", "lr"]
    table = results_html(rows)
    assert table.count("<tr>") == 5 and "<th>loss</th>" in table
