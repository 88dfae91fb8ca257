"""``hive-lab demo`` really starts JupyterLab with hive-lab and submits its sample jobs."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests


@pytest.mark.timeout(180)
def test_demo_starts_lab_and_submits_samples(tmp_path):
    out = tmp_path / "demo.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "hive_lab.cli", "demo", "--no-browser", "--token", "demo-token",
                                 "--dir", str(tmp_path / "demo")], stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while "is at" not in out.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, out.read_text()[-3000:]
            time.sleep(0.2)
        text = out.read_text()
        url = re.search(r"is at (http://\S+/)lab\?token=demo-token", text).group(1)
        assert len(re.findall(r"hive-lab demo: submitted j-\d+", text)) == 4
        headers = {"Authorization": "token demo-token"}
        jobs = requests.get(url + "hive_lab/api/jobs", headers=headers, timeout=10).json()
        assert jobs["total"] == 4
        assert {j["state"] for j in jobs["jobs"]} <= {"scheduled", "running", "queued"}
        assert requests.get(url + "lab", headers=headers, timeout=30).status_code == 200
        cluster = requests.get(url + "hive_lab/api/cluster", headers=headers, timeout=10).json()
        assert cluster["gpus_total"] == 4
        # the sample notebook is there and opens
        import nbformat

        nb = nbformat.read(tmp_path / "demo" / "hive-lab-demo.ipynb", as_version=4)
        assert any("%%submit" in c.source for c in nb.cells)
        assert f"{url}lab/tree/hive-lab-demo.ipynb?token=demo-token" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        import json

        # stopping the demo cancelled its jobs: none is left running (the store says so)
        import sqlite3

        with sqlite3.connect(tmp_path / "demo" / "hive_lab.sqlite") as db:
            states = [row[0] for row in db.execute("select state from jobs")]
        assert states and set(states) <= {"cancelled", "succeeded", "failed"}, states
        assert "hive-lab demo: cancelled j-" in out.read_text()

        for info in (tmp_path / "demo" / "jobs").glob(".*launcher/*/*.json"):
            try:
                os.killpg(int(json.loads(info.read_text())["pid"]), signal.SIGKILL)
            except OSError:
                pass
    assert proc.returncode == 0
