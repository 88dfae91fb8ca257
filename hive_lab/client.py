"""``hive_lab.Client``: a small synchronous wrapper of the REST API (docs/rest-api.md), and the one way
Python talks to it: the magics, the CLI (``hive-lab demo`` too), the widgets and ``hive_lab.job`` all go
through it, so the token header, the base URL, errors, timeouts and the retry of a shed request are
decided here once (tests/client/test_one_transport.py).

Methods return the server's JSON (dicts/lists) unchanged; errors become ``HiveLabError`` subclasses
carrying the server's message. ``Client.handle(job_id)`` gives a :class:`hive_lab.job.Job`.
"""

from __future__ import annotations

import codecs
import os
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import requests
from hive_lab_server.wire import transport

from .discovery import HOW_TO_CONFIGURE, ServerInfo, find_server
from .errors import HiveLabError, ServerError, ServerUnreachable, error_for_status

if TYPE_CHECKING:
    from .job import Job

PAGE_SIZE = 200


class Client:
    """Talks to one hive-lab server. ``Client()`` finds the server by itself (see ``hive_lab.discovery``)."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 runtime_dir: str | None = None, busy_retry_s: float = 60.0,
                 on_busy: "Callable[[float, str], None] | None" = None, server: ServerInfo | None = None):
        # ``server``: one found already (``hive_lab.discovery``), taken as it is
        self.server: ServerInfo = server or find_server(url, token, runtime_dir)
        self.timeout = timeout
        # a request the server shed (503 with Retry-After: nothing was done) is sent again after the pause
        # it asks for, as long as the pauses add up to at most this many seconds (0: never)
        self.busy_retry_s = busy_retry_s
        self.on_busy = on_busy  # told (pause, the server's sentence) before each such pause (the CLI prints it)
        self._sleep = time.sleep
        self.session = requests.Session()
        self.session.headers.update(transport.request_headers(self.server.token))
        self._me: dict | None = None

    def __repr__(self) -> str:
        return f"<hive_lab.Client {self.server.base_url} (found via {self.server.source})>"

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def api_url(self) -> str:
        return self.server.api_url

    # -- transport -----------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """A call of hive-lab's API (``path`` relative to ``<base_url>hive_lab/api/``)."""
        return self._call(method, self.api_url + path, **kwargs)

    def _call(self, method: str, url: str, *, params: dict | None = None, json: Any = None,
              stream: bool = False, timeout: float | None = None, raw: bool = False,
              data: bytes | None = None, headers: dict | None = None) -> Any:
        waited = 0.0
        while True:
            resp = self._send(method, url, params=params, json=json, stream=stream, data=data, headers=headers,
                              timeout=timeout)
            pause = _retry_after(resp)
            if pause is None or waited + pause > self.busy_retry_s:
                break
            if self.on_busy is not None:
                self.on_busy(pause, self._error(resp).message)
            resp.close()
            self._sleep(pause)
            waited += pause
        if resp.status_code >= 400:
            raise self._error(resp)
        if raw or stream:
            return resp
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise ServerError(
                f"{method} {url} answered {resp.status_code} with something that is not JSON "
                f"(is {self.base_url} a Jupyter server with hive-lab installed?)", status=resp.status_code
            ) from None

    def _send(self, method: str, url: str, *, timeout: float | None, **kwargs: Any) -> requests.Response:
        try:
            return self.session.request(method, url, timeout=timeout if timeout is not None else self.timeout, **kwargs)
        except requests.ConnectionError as exc:
            raise ServerUnreachable(
                f"Cannot reach the hive-lab server at {self.base_url} (found via {self.server.source}): "
                f"{_short(exc)}. Is it running? " + _fix_hint(self.server.source)
            ) from None
        except requests.Timeout:
            raise ServerUnreachable(
                f"The hive-lab server at {self.base_url} did not answer within {self.timeout:g} s."
            ) from None

    def _error(self, resp: requests.Response) -> HiveLabError:
        message, field = transport.error_reply(resp.content)
        if resp.status_code == 401 or (resp.status_code == 403 and message is None):
            message = (  # the server's "authenticate first" does not say where a client's token comes from
                f"The hive-lab server at {self.base_url} refused the token "
                f"({'none given' if not self.server.token else 'wrong or expired'}). "
                "Set HIVE_LAB_TOKEN or pass token= (CLI: --token)."
            )
        if resp.status_code == 404 and message is None:
            message = f"Not found: {resp.request.method} {resp.url} (is hive-lab installed on that server?)"
        if message is None:
            message = f"{resp.request.method} {resp.url} failed with HTTP {resp.status_code}: {resp.text[:200]}"
        return error_for_status(resp.status_code, message, field)

    # -- jobs ----------------------------------------------------------------------------------

    def submit(self, spec: dict | None = None, inherit_env: bool = True, **fields: Any) -> dict:
        """Submit a job (``POST jobs``). ``spec`` is the native or OpenPAI form; ``fields`` override it
        (``after=[job, ...]``: start once those jobs succeeded; ``depends_on`` for failed/ended).
        A job without an image runs in this process's environment (``hive_lab.environment``) unless
        ``inherit_env`` is False or the spec names an ``environment``."""
        return self._request("POST", "jobs", json=self._body(spec, fields, inherit_env))

    def submit_notebook(self, path: str, parameters: dict | None = None, **options: Any) -> dict:
        """Run the notebook at ``path`` as a job (``POST jobs`` with ``notebook``): papermill injects
        ``parameters`` after its cell tagged ``parameters``; the executed copy is an output of the job
        (``<name>.executed.ipynb``). ``options``: ``gpus``, ``vc``, ``time_limit``, ``files`` ... as
        ``hive_lab.submission.cell_spec`` takes them."""
        from .submission import notebook_job_spec

        return self.submit(notebook_job_spec(path, parameters, **options))

    def submit_file(self, text: str, content_type: str, *, dry_run: bool = False, no_image: bool = False) -> dict:
        """Send a job file as it is (an OpenPAI job, an sbatch script, a Kubernetes manifest, or hive-lab's
        own spec): ``POST jobs`` with the file as the body; with ``dry_run`` the what-if answer. ``no_image``
        (a server without containers): the images it names are not applied; its commands run as processes."""
        params = {k: "true" for k, on in (("dry_run", dry_run), ("no_image", no_image)) if on}
        return self._request("POST", "jobs", params=params or None,
                             data=text.encode("utf-8"), headers={"Content-Type": content_type})

    def what_if(self, spec: dict | None = None, inherit_env: bool = True, **fields: Any) -> dict:
        """What would happen to this job if it were submitted now (``POST jobs?dry_run=true``): start at
        once on which GPUs, preempt which jobs, or wait and why. Nothing is stored or started."""
        return self._request("POST", "jobs", params={"dry_run": "true"}, json=self._body(spec, fields, inherit_env))

    @staticmethod
    def _body(spec: dict | None, fields: dict, inherit_env: bool) -> dict:
        from .environment import with_environment

        body = dict(spec or {})
        body.update({k: v for k, v in fields.items() if v is not None})
        if "after" in body:  # after=[job, "j-000012", ...]: Job handles and job dicts become their ids
            from .dependencies import job_id_of

            after = body["after"] if isinstance(body["after"], (list, tuple)) else [body["after"]]
            body["after"] = [job_id_of(a) or a for a in after]
        return with_environment(body) if inherit_env else body

    # -- recurring jobs (schedules; docs/schedules.md) ------------------------------------------

    def schedules(self, user: str | None = None) -> list[dict]:
        """Your schedules, with their next run and last runs (admins: everyone's, or ``user``'s)."""
        return self._request("GET", "schedules", params={"user": user} if user else None)["schedules"]

    def schedule(self, schedule_id: str) -> dict:
        return self._request("GET", f"schedules/{schedule_id}")

    def add_schedule(self, cron: str, job: dict, *, name: str | None = None, timezone: str = "UTC",
                     policy: str = "skip", paused: bool = False, inherit_env: bool = True) -> dict:
        """Submit ``job`` (a JobSpec) as you at each time ``cron`` names in ``timezone``; ``policy``: skip,
        queue_one or run_all (for a run still going, or runs missed while the server was down). A schedule
        of yours named ``name`` is replaced (the answer has ``"replaced": true``); no name: its id."""
        body = {"cron": cron, "timezone": timezone, "policy": policy, "paused": paused,
                "job": self._body(job, {}, inherit_env)}
        if name:
            body["name"] = name
        return self._request("POST", "schedules", json=body)

    def pause_schedule(self, schedule_id: str) -> dict:
        return self._request("POST", f"schedules/{schedule_id}/pause")

    def resume_schedule(self, schedule_id: str) -> dict:
        return self._request("POST", f"schedules/{schedule_id}/resume")

    def delete_schedule(self, schedule_id: str) -> None:
        self._request("DELETE", f"schedules/{schedule_id}")

    def jobs(self, user: str | None = "me", vc: str | None = None, state: str | list[str] | None = None,
             limit: int | None = None, elements: bool = True) -> list[dict]:
        """Jobs, newest first as the server orders them. ``user=None`` means everybody's;
        ``limit=None`` follows the pages to the end (by cursor: jobs submitted meanwhile neither repeat
        one nor end the walk early; they are newer than the first page)."""
        out: list[dict] = []
        after = None
        while True:
            page_size = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(out))
            page = self.jobs_page(user=user, vc=vc, state=state, limit=page_size, elements=elements, after=after)
            out.extend(page.get("jobs", []))
            after = page.get("next")
            if after is None or (limit is not None and len(out) >= limit):
                return out

    def jobs_page(self, user: str | None = "me", vc: str | None = None,
                  state: str | list[str] | None = None, limit: int = 50, offset: int = 0,
                  elements: bool = True, after: int | None = None) -> dict:
        """``elements=False``: without the elements of job arrays (``arrays()`` counts them); ``after``: the
        previous page's ``next`` (``offset`` is for servers before cursors: pages shift as jobs arrive)."""
        params = _page(limit, offset, after, user)
        if not elements:
            params["elements"] = "false"
        if vc:
            params["vc"] = vc
        if state:
            params["state"] = state if isinstance(state, str) else ",".join(state)
        return self._request("GET", "jobs", params=params)

    def job(self, job_id: str) -> dict:
        return self._request("GET", f"jobs/{quote(job_id, safe='')}")

    def cancel(self, job_id: str, reason: str = "") -> dict:
        """Cancel a job; ``reason`` is recorded with who cancelled it ("cancelled by ivy (REASON)"), and a
        GPU kernel's notebook shows it."""
        params = {"reason": reason} if reason else None
        return self._request("DELETE", f"jobs/{quote(job_id, safe='')}", params=params)

    # -- job arrays and sweeps (docs/arrays.md) -------------------------------------------------------

    def submit_array(self, spec: dict | None = None, *, array: str | None = None, sweep: dict | None = None,
                     inherit_env: bool = True, **fields: Any) -> dict:
        """Submit a job array (``array="0-49%8"``) or sweep (``sweep={"lr": [0.1, 0.01]}``, with
        ``array="%8"`` for a throttle): ``POST arrays``. Answers the array (``id`` a-..., counts by state)."""
        body = self._body(spec, fields, inherit_env)
        if array is not None:
            body["array"] = array
        if sweep is not None:
            body["sweep"] = sweep
        return self._request("POST", "arrays", json=body)

    def arrays(self, user: str | None = "me", limit: int = 50, offset: int = 0, after: int | None = None) -> dict:
        """A page of arrays, newest first, with their counts by state (``user="*"``: everyone's, admins);
        ``after``: the previous page's ``next``."""
        return self._request("GET", "arrays", params=_page(limit, offset, after, user))

    def array(self, array_id: str, limit: int = 100, offset: int = 0) -> dict:
        """One array with a page of its elements (by index)."""
        return self._request("GET", f"arrays/{quote(array_id, safe='')}", params={"limit": limit, "offset": offset})

    def array_elements(self, array_id: str) -> list[dict]:
        """Every element of the array, by index (pending ones have no ``job_id`` yet)."""
        out: list[dict] = []
        while True:
            page = self.array(array_id, limit=1000, offset=len(out))
            out.extend(page.get("elements") or [])
            if not page.get("elements") or len(out) >= page.get("count", 0):
                return out

    def cancel_array(self, array_id: str, indices: str | None = None, reason: str = "") -> dict:
        """Cancel the array's elements not ended, or only ``indices`` ("3,5-7")."""
        body: dict[str, Any] = {"reason": reason} if reason else {}
        if indices:
            body["indices"] = indices
        return self._request("POST", f"arrays/{quote(array_id, safe='')}/cancel", json=body)

    def pause_array(self, array_id: str) -> dict:
        """Release no more elements and pause those not ended."""
        return self._request("POST", f"arrays/{quote(array_id, safe='')}/pause", json={})

    def resume_array(self, array_id: str) -> dict:
        return self._request("POST", f"arrays/{quote(array_id, safe='')}/resume", json={})

    def set_throttle(self, array_id: str, throttle: int | None) -> dict:
        """At most ``throttle`` elements not ended at once (None: no throttle)."""
        return self._request("PATCH", f"arrays/{quote(array_id, safe='')}", json={"throttle": throttle})

    # -- pause / resume / migrate / resize (docs/checkpoint.md) -----------------------------------

    def _action(self, job: "str | dict | Job", action: str, body: dict) -> dict:
        job_id = job if isinstance(job, str) else job["id"] if isinstance(job, dict) else job.id
        return self._request("POST", f"jobs/{quote(job_id, safe='')}/{action}", json=body)

    def pause(self, job: "str | dict | Job", reason: str = "") -> dict:
        """Pause a job (an id, a job dict or a ``Job``; its owner or an admin): a running one gets the checkpoint signal and stops; a
        paused job holds no GPU and is out of the queue until :meth:`resume`. ``reason`` goes into its
        history. Returns the job."""
        return self._action(job, "pause", {"reason": reason} if reason else {})

    def resume(self, job: "str | dict | Job", reason: str = "") -> dict:
        """Queue a paused job again (its owner or an admin); it starts with ``HIVE_RESUMED=1``."""
        return self._action(job, "resume", {"reason": reason} if reason else {})

    def migrate(self, job: "str | dict | Job", gpu_type: str, reason: str = "") -> dict:
        """Admins: move a job to GPUs of ``gpu_type`` (e.g. ``"V100"``), through a checkpoint if it runs."""
        return self._action(job, "migrate", {"gpu_type": gpu_type, **({"reason": reason} if reason else {})})

    def resize(self, job: "str | dict | Job", gpus: int, reason: str = "") -> dict:
        """Admins: give an elastic job (``min_gpus``..``max_gpus``) ``gpus`` GPUs, through a checkpoint."""
        return self._action(job, "resize", {"gpus": gpus, **({"reason": reason} if reason else {})})

    def logs(self, job_id: str, task: str | None = None, offset: int = 0, follow: bool = False):
        """One page of a task's log (dict per the contract); with ``follow=True`` an iterator of text
        chunks that ends when the task ends."""
        if follow:
            return self.follow_logs(job_id, task=task, offset=offset)
        params: dict[str, Any] = {"offset": offset}
        if task:
            params["task"] = task
        return self._request("GET", f"jobs/{quote(job_id, safe='')}/logs", params=params)

    def log_text(self, job_id: str, task: str | None = None) -> str:
        """The whole log written so far."""
        parts, offset = [], 0
        while True:
            page = self.logs(job_id, task=task, offset=offset)
            parts.append(page.get("data", ""))
            nxt = page.get("next_offset", offset)
            if page.get("eof", True) or nxt <= offset:
                return "".join(parts)
            offset = nxt

    def follow_logs(self, job_id: str, task: str | None = None, offset: int = 0) -> Iterator[str]:
        params: dict[str, Any] = {"offset": offset, "follow": 1}
        if task:
            params["task"] = task
        resp = self._request("GET", f"jobs/{quote(job_id, safe='')}/logs", params=params, stream=True,
                             timeout=None)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with resp:
            for chunk in resp.iter_content(chunk_size=None):
                text = decoder.decode(chunk)
                if text:
                    yield text
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail

    def outputs(self, job_id: str) -> list[dict]:
        """Files the job wrote to its output dir: ``[{"path", "size"}]``."""
        return self._request("GET", f"jobs/{quote(job_id, safe='')}/outputs").get("files", [])

    def output(self, job_id: str, path: str) -> bytes:
        resp = self._request("GET", f"jobs/{quote(job_id, safe='')}/outputs/{quote(path)}", raw=True)
        return resp.content

    def download_outputs(self, job_id: str, dest: str | os.PathLike) -> list[pathlib.Path]:
        """Copy every output file under ``dest`` (keeping relative paths); returns the local paths."""
        dest = pathlib.Path(dest)
        written = []
        for item in self.outputs(job_id):
            rel = pathlib.PurePosixPath(item["path"])
            if rel.is_absolute() or ".." in rel.parts:
                continue  # never write outside dest, whatever the server says
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.output(job_id, item["path"]))
            written.append(target)
        return written

    def handle(self, job: str | dict):
        """A :class:`hive_lab.job.Job` handle for a job id or job object."""
        from .job import Job

        return Job(self, job)

    # -- cluster -------------------------------------------------------------------------------

    def vcs(self) -> list[dict]:
        return self._request("GET", "vcs").get("vcs", [])

    def cluster(self) -> dict:
        return self._request("GET", "cluster")

    def me(self, refresh: bool = False) -> dict:
        if self._me is None or refresh:
            self._me = self._request("GET", "me")
        return self._me

    def usage(self, since: str = "7d", by: str = "user", user: str | None = None,
              vc: str | None = None) -> list[dict]:
        """Usage totals (``GET usage``): one row per user, VC or day (``by``) since ``since`` (7d, 24h,
        an ISO date); each with gpu_seconds, gpu_seconds_by_type, cpu_seconds, peak_memory_mb, jobs.
        ``vc``: only usage in that VC (or comma-separated VCs). Non-admins get their own rows only."""
        params: dict[str, Any] = {"since": since, "by": by}
        if user:
            params["user"] = user
        if vc:
            params["vc"] = vc
        return self._request("GET", "usage", params=params).get("rows", [])

    def history(self, since: str = "7d", real_names: bool = False) -> dict:
        """The cluster's jobs since ``since`` as a history trace (``GET history``, admins): ``jobs`` (rows
        keyed by ``columns``), the live ``cluster`` model and ``policy``; owners pseudonymised unless
        ``real_names``. ``hive_lab.replay`` and ``hive-lab admin history`` read it."""
        params: dict[str, Any] = {"since": since}
        if real_names:
            params["real_names"] = "true"
        return self._request("GET", "history", params=params)

    def metrics(self) -> str:
        return self._request("GET", "metrics", raw=True).text

    # -- admin: drains and GPU health -----------------------------------------------------------

    def _node_path(self, node: str, gpu: int | None) -> str:
        path = f"nodes/{quote(node, safe='')}/"
        return path if gpu is None else path + f"gpus/{int(gpu)}/"

    def drain(self, node: str, gpu: int | None = None) -> dict:
        """Admins: nothing new starts on the node (or one GPU); running jobs finish."""
        return self._request("POST", self._node_path(node, gpu) + "drain")

    def undrain(self, node: str, gpu: int | None = None) -> dict:
        return self._request("POST", self._node_path(node, gpu) + "undrain")

    def mark_healthy(self, node: str, gpu: int | None = None) -> dict:
        """Admins: the node's (or GPU's) bad GPUs were reset or repaired; give them out again."""
        return self._request("POST", self._node_path(node, gpu) + "healthy")

    # -- per-user limits of a VC -----------------------------------------------------------------

    def limits(self, vc: str) -> dict:
        """The VC's per-user limits: ``{"vc", "default", "groups", "users", "source"}``."""
        return self._request("GET", f"vcs/{quote(vc, safe='')}/limits")

    def set_limits(self, vc: str, limits: dict) -> dict:
        """Admins: replace the VC's per-user limits with ``{"default": {...}, "groups": {...}, "users": {...}}``
        (stored; applied at once). Returns the limits now in effect."""
        body = {k: limits[k] for k in ("default", "groups", "users") if k in limits}
        return self._request("PUT", f"vcs/{quote(vc, safe='')}/limits", json=body)

    def my_limits(self, vc: str | None = None) -> dict:
        """The caller's limits in effect (``GET me``): VC -> {key: value}, or one VC's when ``vc`` is given."""
        limits = self.me(refresh=True).get("limits") or {}
        return limits.get(vc, {}) if vc is not None else limits

    # -- the Jupyter server's own API ----------------------------------------------------------

    def kernel(self, kernel_id: str) -> dict:
        """The Jupyter server's record of one of its kernels (``GET <base_url>api/kernels/<id>``:
        ``connections`` counts the browsers attached to it)."""
        return self._call("GET", self.base_url + f"api/kernels/{quote(kernel_id, safe='')}")

    # -- live events ---------------------------------------------------------------------------

    def events_url(self) -> str:
        return "ws" + self.api_url[len("http"):] + "events"

    def subscribe(self, callback, *, on_error=None, since: int | None = None):
        """Call ``callback(message_dict)`` for each event (in a background thread) until ``.close()``;
        ``since``: replay the state changes after that seq first (docs/rest-api.md, "Events")."""
        from .events import EventStream

        return EventStream(self, callback, on_error=on_error, since=since).start()


def _page(limit: int, offset: int, after: int | None, user: str | None) -> dict[str, Any]:
    """The query of a page of jobs or arrays: by cursor (``after``) when there is one, else by offset."""
    params: dict[str, Any] = {"limit": limit}
    if after is not None:
        params["after"] = after
    elif offset:
        params["offset"] = offset
    if user:
        params["user"] = user
    return params


def _fix_hint(source: str) -> str:
    if source == "arguments":
        return "Check the URL you passed (url=, CLI: --url)."
    if source == "HIVE_LAB_URL":
        return "Check HIVE_LAB_URL (or pass url=, CLI: --url)."
    if source.startswith("JupyterHub"):
        return "Check JUPYTERHUB_SERVICE_URL/JUPYTERHUB_SERVICE_PREFIX, or set HIVE_LAB_URL and HIVE_LAB_TOKEN."
    return HOW_TO_CONFIGURE


def _short(exc: Exception) -> str:
    text = str(exc)
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host name"
    return text[:160]


def _retry_after(resp: requests.Response) -> float | None:
    return transport.retry_after(resp.status_code, resp.headers)
