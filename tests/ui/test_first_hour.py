"""A data scientist's first hour, as an ordinary Unix user (issue 30): her own ``jupyter lab`` with
hive-lab on its embedded default (a simulated cluster), a real Chromium, the README's own cells and
commands. Root hides what breaks for everyone else (PATH, kernelspec dirs, files root can read), so
nothing here runs as root but the fixture that makes the account.

The walk: the README's notebook cells from a notebook; the empty panel's terminal line from her shell;
"submit current notebook" from the palette; the README's GPU kernel; then a reload and a kernel restart.
Nothing may fail, and no line may go stale (a job that ended must not still say it runs).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import shlex
import subprocess
import time

import pytest
import requests
from playwright.sync_api import expect

from fixtures.browser import LAB_ARGS, RESULTS, run_from_palette, write_lab_page_config
from fixtures.jupyterhub import HUB_VENV, ensure_unix_user
from fixtures.readme import FILES, inline_commands, python_blocks, section
from playwright_loop import jp_asyncio_loop, jp_server_cleanup  # noqa: F401 (fixtures: Playwright's loop)
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

USER = "dana"


def readme_first_job() -> tuple[list[str], list[str], str]:
    """The README's "Your first job" cells and `hive-lab` commands, and the empty panel's terminal line."""
    text = section("Your first job")
    return (python_blocks(text)[:2], inline_commands(text),
            "hive-lab submit --gpus 1 --wait -- python -c \"print('hello from a GPU job')\"")


class HerLab:
    """``jupyter lab`` run by the Unix user ``dana`` from a venv she can read, as ``scripts/run.sh`` runs it
    (the venv's bin first on PATH, for Lab, its terminals and kernels)."""

    def __init__(self, tmp: pathlib.Path):
        self.account = ensure_unix_user(USER)
        self.home = pathlib.Path(self.account.pw_dir)
        self.work = self.home / f"first-hour-{secrets.token_hex(3)}"
        self.token = secrets.token_hex(16)
        # a Jupyter data dir of this run's own: her store, jobs, kernelspecs and runtime files start empty
        # (her account, and its home, outlive the test)
        self.env = {"HOME": str(self.home), "USER": USER, "LOGNAME": USER, "SHELL": "/bin/bash", "LANG": "C.UTF-8",
                    "PATH": f"{HUB_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                    "JUPYTER_DATA_DIR": str(self.work / ".jupyter-data")}
        self.log_path = tmp / "lab.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def as_her(self, command: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """A command in her login-like shell (her HOME, her PATH, her id), in her work dir."""
        return subprocess.run(["/bin/bash", "-c", command], cwd=self.work, env=self.env, user=USER,
                              group=self.account.pw_gid, extra_groups=[], capture_output=True, text=True,
                              timeout=timeout)

    def write(self, name: str, text: str) -> pathlib.Path:
        path = self.work / name
        path.write_text(text)
        os.chown(path, self.account.pw_uid, self.account.pw_gid)
        return path

    def start(self) -> None:
        self.work.mkdir()
        os.chown(self.work, self.account.pw_uid, self.account.pw_gid)
        settings = self.work / ".lab-settings"
        news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True)
        news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        # her Lab leaves out the plugins no test looks at (a config dir of this run's own, for her server only)
        config = self.work / ".jupyter-config"
        write_lab_page_config(config)
        subprocess.run(["chown", "-R", f"{USER}:", str(settings), str(config)], check=True)
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(HUB_VENV / "bin" / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.work}",
             f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={self.work / '.workspaces'}",
             *LAB_ARGS],
            cwd=self.work, env={**self.env, "JUPYTER_CONFIG_DIR": str(config)}, user=USER, group=self.account.pw_gid, extra_groups=[],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._up, "her JupyterLab to answer", timeout=120)

    def _up(self) -> bool:
        assert self.proc.poll() is None, self.log()
        try:
            return self.api("GET", "me").status_code == 200
        except requests.ConnectionError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        base = self.url if path.startswith("/") else self.url + "hive_lab/api/"
        return requests.request(method, base + path.lstrip("/"), timeout=30,
                                headers={"Authorization": f"token {self.token}"}, **kwargs)

    def jobs_named(self, name: str) -> list[dict]:
        return [j for j in self.api("GET", "jobs", params={"limit": 500}).json()["jobs"] if j["name"] == name]

    def job_named(self, name: str) -> dict | None:
        """Her one job of that name (None before it exists)."""
        jobs = self.jobs_named(name)
        assert len(jobs) <= 1, f"{len(jobs)} jobs named {name}: {[j['id'] for j in jobs]}"
        return jobs[0] if jobs else None

    def wait_for(self, name: str, *states: str, timeout: float = 120) -> dict:
        found: list[dict] = []

        def reached() -> bool:
            try:
                job = self.job_named(name)
            except requests.ConnectionError:
                # Under the parallel suite her server has twice closed a fresh connection of this poll
                # without an answer ("Remote end closed connection without response"; cause not found
                # yet: the stop-43 note). A read is safe to ask again, and the next poll does.
                return False
            found[:] = [job] if job else []
            return bool(job) and job["state"] in states

        def seen() -> str:  # what a failure says: the job as last seen (or none), and her server's log's end
            state = f"{found[0]['id']} {found[0]['state']}" if found else "no job of that name"
            return (f"job {name} to be {' or '.join(states)} (last seen: {state}); her jobs: "
                    f"{[(j['id'], j['name'], j['state']) for j in self.api('GET', 'jobs').json()['jobs']]}")

        wait_until(reached, seen, timeout=timeout)
        return found[0]

    def tracebacks(self) -> list[str]:
        """The tracebacks in her server's log, less those of ipykernel's own races at a kernel restart,
        neither hive-lab's code nor harmful to her: a ``delete_subshell_request`` that JupyterLab sends when a
        page reloads after a kernel restart fails in ipykernel 7's control thread with ``assert
        current_thread() == self.parent_thread``; and a reply (e.g. ``comm_info_reply``) the kernel sends on
        a socket the restart has just closed (``zmq.error.ZMQError: Socket operation on non-socket``, every
        frame in ipykernel, jupyter_client and zmq)."""
        blocks = [b[:1500] for b in self.log().split("Traceback (most recent call last):")[1:]]
        return [b for b in blocks if "delete_subshell_request" not in b and not _closed_socket_reply(b)]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        # her jobs and kernels are her processes: none may outlive the test
        subprocess.run(["pkill", "-KILL", "-u", USER], check=False)


@pytest.fixture
def her_lab(tmp_path, hub_venv):
    lab = HerLab(tmp_path)
    try:
        lab.start()
        yield lab
    finally:
        lab.close()


def notebook(cells: list[str], kernel: str = "python3", display: str = "Python 3") -> str:
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": display, "language": "python", "name": kernel}},
        "nbformat": 4, "nbformat_minor": 5})


def open_notebook(page, lab: HerLab, name: str) -> None:
    page.goto(f"{lab.url}lab/tree/{name}?reset&token={lab.token}")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=90_000)
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(timeout=90_000)
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=90_000)


def run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def save(page, path: pathlib.Path, text: str) -> None:
    """Ctrl+S in the notebook, until the file on disk holds ``text``. The key is pressed again while the
    file does not hold it yet: on a busy machine a key pressed before Lab's handler has the notebook's
    focus is lost (a second save of the same notebook is harmless)."""
    def saved() -> bool:
        if text in path.read_text():
            return True
        page.locator(".jp-NotebookPanel:visible .jp-Notebook").first.click(position={"x": 5, "y": 5})
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")
        return False

    wait_until(saved, f"{path.name} saved", poll=2.0, timeout=120)


def cell_output(page, i: int):
    return page.locator(".jp-NotebookPanel:visible .jp-Cell").nth(i).locator(".jp-OutputArea")


def test_the_first_hour_as_an_ordinary_user(her_lab, chromium):
    lab = her_lab
    cells, commands, terminal_line = readme_first_job()
    errors: list[str] = []
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        # 1. the README's cells, from a notebook: the job runs in her kernel's environment; a third cell's
        #    job is still running when she saves
        go = lab.work / "go-slow"
        slow = f"%%submit --gpus 1 --name slow\nimport os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.1)\n"
        lab.write("first.ipynb", notebook(cells + [slow]))
        open_notebook(page, lab, "first.ipynb")
        run_all(page)
        out = cell_output(page, 1)
        expect(out).to_contain_text("hello: succeeded (exit code 0)", timeout=120_000)
        expect(out).to_contain_text(f"python: {HUB_VENV}/bin/python")
        hello = lab.job_named("hello")
        assert hello["user"] == USER and hello["state"] == "succeeded"
        expect(cell_output(page, 2)).to_contain_text("slow: running", timeout=60_000)
        save(page, lab.work / "first.ipynb", "slow: running")

        # 2. the empty panel's line and every command of the README's section, from her shell: `hive-lab` is on
        #    her PATH and finds her server by itself
        done = lab.as_her(terminal_line)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "hello from a GPU job" in done.stdout + done.stderr
        for name, content in FILES.items():
            lab.write(name, content)
        last_job = None
        for command in commands:
            command = re.sub(r"\s*\n\s*", " ", command)  # a command the README wraps over two lines
            if " JOB" in command:
                assert last_job, f"{command}: the README submits no job before it"
                command = command.replace(" JOB", f" {last_job}")
            ran = lab.as_her(command)
            assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
            found = re.search(r"\bj-\d+", ran.stdout)
            if command.startswith("hive-lab submit") and found:
                last_job = found.group(0)
        listed = lab.as_her("hive-lab jobs")
        assert listed.returncode == 0 and "hello" in listed.stdout, listed.stdout + listed.stderr
        for job in lab.api("GET", "jobs", params={"limit": 500}).json()["jobs"]:  # every one of them ends well
            if job["name"] != "slow":
                wait_until(lambda j=job: lab.api("GET", f"jobs/{j['id']}").json()["state"] in
                           ("succeeded", "failed", "cancelled"), f"{job['id']} ({job['name']}) to end", timeout=240)
                ended = lab.api("GET", f"jobs/{job['id']}").json()
                assert ended["state"] == "succeeded", (ended, lab.api("GET", f"jobs/{job['id']}/logs").text[-2000:])

        # 3. "submit current notebook as a job" from the palette
        lab.write("analysis.ipynb", notebook(["import sys; print('analysis by', sys.executable, 6 * 7)"]))
        open_notebook(page, lab, "analysis.ipynb")
        run_from_palette(page, "GPU cluster: submit current notebook as a job")
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("analysis.ipynb")
        dialog.locator("button", has_text="Submit").click()
        expect(dialog).to_have_count(0)
        job = lab.wait_for("analysis", "succeeded", "failed", "cancelled", timeout=180)
        assert job["state"] == "succeeded", lab.api("GET", f"jobs/{job['id']}/logs").text[-3000:]

        # 4. the README's GPU kernel (installed by her, for her, in step 2): a notebook on it gets a GPU
        kernelspec = next(c for c in commands if c.startswith("hive-lab kernelspec install"))
        name = re.search(r"--name (\S+)", kernelspec).group(1)
        lab.write("gpu.ipynb", notebook(["import os; print('gpu kernel sees', os.environ['CUDA_VISIBLE_DEVICES'])"],
                                        kernel=name, display=name))
        open_notebook(page, lab, "gpu.ipynb")
        run_all(page)
        expect(cell_output(page, 0)).to_contain_text(re.compile(r"gpu kernel sees \d"), timeout=120_000)

        # 5. her first notebook's kernel is shut down and the slow job ends meanwhile: nobody updates the saved
        #    "running". Reopened, the cell says how it ended; reloaded, its kernel restarted: nothing stale
        first = next(x for x in lab.api("GET", "/api/sessions").json() if x["path"].endswith("first.ipynb"))
        assert lab.api("DELETE", f"/api/sessions/{first['id']}").status_code == 204
        go.touch()
        lab.wait_for("slow", "succeeded", "failed")
        assert "slow: running" in (lab.work / "first.ipynb").read_text()  # what the file says
        open_notebook(page, lab, "first.ipynb")
        expect(cell_output(page, 1)).to_contain_text("hello: succeeded (exit code 0)", timeout=60_000)
        expect(cell_output(page, 2)).to_contain_text("slow: succeeded (exit code 0)", timeout=60_000)
        sessions = lab.api("GET", "/api/sessions").json()
        mine = next(s for s in sessions if s["path"].endswith("first.ipynb"))
        assert lab.api("POST", f"/api/kernels/{mine['kernel']['id']}/restart").status_code == 200
        page.reload()
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(state="visible", timeout=90_000)
        expect(cell_output(page, 1)).to_contain_text("hello: succeeded (exit code 0)", timeout=60_000)
        expect(cell_output(page, 2)).to_contain_text("slow: succeeded (exit code 0)", timeout=60_000)
        shown = " ".join(page.locator(".jp-NotebookPanel:visible .jp-OutputArea").all_inner_texts())
        for stale in ("running", "queued", "starts any moment", "Error displaying widget"):
            assert stale not in shown, (stale, shown)
        RESULTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(RESULTS / "first-hour.png"), full_page=True)
        assert not errors, errors
        assert not lab.tracebacks(), lab.tracebacks()
    finally:
        context.close()


def _closed_socket_reply(block: str) -> bool:
    """A traceback of the kernel replying on a socket its restart closed, with no hive-lab frame in it."""
    return ("zmq.error.ZMQError: Socket operation on non-socket" in block and "ipykernel/kernelbase.py" in block
            and "hive_lab" not in block)
