"""The Hub-managed hive-lab service stops on SIGINT (issue 26: it asked "Shutdown this server?" on the stdin it
inherited from the Hub, where nobody answers, and stopped only at SIGTERM,
so stopping a Hub took ~31 s and a quick restart found the ports busy), whether the Hub was started from a
terminal or from a script in the background (whose children inherit SIGINT ignored)."""

from __future__ import annotations

import os
import pathlib
import pty
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest
import requests

from fixtures.live_server import free_port
from waiting import wait_until


@pytest.mark.parametrize("started_from", ["a terminal", "a background script"])
def test_the_service_stops_on_sigint(tmp_path, started_from):
    port = free_port()
    env = {**os.environ, "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}/services/hive-lab/",
           "JUPYTERHUB_SERVICE_PREFIX": "/services/hive-lab/", "JUPYTERHUB_API_TOKEN": "not-used-here",
           "JUPYTERHUB_API_URL": f"http://127.0.0.1:{free_port()}/hub/api",
           "JUPYTER_DATA_DIR": str(tmp_path / "data"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    log = open(tmp_path / "service.log", "w")
    master, terminal = pty.openpty()  # a Hub started from a terminal: its services inherit the terminal
    if started_from == "a terminal":
        stdin, preexec = terminal, None
    else:  # `jupyterhub &` in a script: no terminal, and SIGINT ignored from the start (inherited)
        stdin, preexec = subprocess.DEVNULL, lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
    # as root the service runs jobs as their owners: its jobs root must be reachable by them (it refuses to
    # start otherwise), which pytest's 0700 tmp dirs are not
    top = pathlib.Path(tempfile.mkdtemp(prefix="hive-signals-", dir="/tmp"))
    os.chmod(top, 0o711)
    proc = subprocess.Popen([sys.executable, "-m", "hive_lab_server.hub.service_app",
                             f"--HiveLabApp.jobs_root={top / 'jobs'}"],
                            env=env, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            preexec_fn=preexec)
    os.close(terminal)
    try:
        def answers():
            try:
                return requests.get(f"http://127.0.0.1:{port}/services/hive-lab/api/status", timeout=2).status_code
            except (requests.ConnectionError, requests.Timeout):  # not listening, or still starting (its socket
                # is bound before its loop runs: on a loaded machine a first answer may take longer than 2 s)
                assert proc.poll() is None, (tmp_path / "service.log").read_text()[-3000:]
                return None
        wait_until(answers, "the service to listen")
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: proc.poll() is not None, "the service to stop after SIGINT", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.close()
        os.close(master)
        shutil.rmtree(top, ignore_errors=True)
