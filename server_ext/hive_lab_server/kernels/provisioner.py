"""``hive`` kernel provisioner: a notebook kernel is a scheduled hive-lab job holding GPUs.

Install a kernelspec with ``hive-lab kernelspec install --name gpu-1 --gpus 1 [--image IMG]``. When
Jupyter starts such a kernel, the provisioner submits a job of kind ``kernel`` (``POST jobs``) that
runs the kernel command (see ``kernels.job``); the service schedules it like any job and its launcher
starts it on the granted GPUs, in a container when the kernelspec names an image, else as a local
process with ``CUDA_VISIBLE_DEVICES``.

- Launching waits only for the scheduler's decision (at most ``placement_wait_s``), not for GPUs to
  free up: when the job is placed at once (GPUs free), the connection info's ``ip`` is set to the
  placed node's address (``placement[].address``, Slurm's NodeAddr) before Jupyter connects, and the
  kernel binds that address (``0.0.0.0`` where it is a host name; see ``kernels.job``). A kernel that
  must wait returns at once as before; its connection info gets the node's address when the grant
  arrives (clients made from then on use it; on a single machine nothing changes). Its ZMQ ports
  are chosen before it runs, so Jupyter connects and its first messages wait in the sockets until
  the kernel starts. While the job is queued the server log says why (warning, repeated every
  ``queue_log_interval_s``); the hive-lab panel shows the queued kernel job and its reason; and the
  first cell the kernel runs prints how long it waited, why, and which GPUs it holds.
- A kernel the service refuses (a limit, a VC the user may not use, a GPU type the cluster lacks)
  fails to start with the service's 4xx and sentence (``kernels.refusal``; the Lab's session routes
  answer it too, ``kernels.session_handlers``); a service that cannot be asked is a 503 that says so.
- Restart keeps the job, hence the GPUs (the job's supervisor reruns the kernel); shutdown ends the
  job (``DELETE jobs/{id}``), which releases them. If the service stops the job (cancel,
  preemption), the kernel dies and Jupyter sees it.
- Idle culling (``kernels.culler``): a kernel holding GPUs that executed nothing for ``idle_timeout``
  seconds (the smaller of the kernelspec's value and its VC's ``idle_timeout_per_vc``) and whose GPUs
  are not busy (NVML, where known) is cancelled with a reason the panel shows and shut down; the
  next kernel of the same notebook says so in its first output (also after a preemption).
- Heartbeat: while this server holds the kernel it refreshes ``.hive-kernel/alive`` in the job's
  working dir; a kernel whose server died (unreachable for ever) stops after ``heartbeat_lease_s``.
- Cancelled stays cancelled: a job someone else cancels (an instructor, a time limit) is not asked for
  again by jupyter_server's restarter; a stand-in kernel without GPUs (``kernels.ended``) takes its
  place and answers every cell with who cancelled it, why, and that Kernel > Restart asks for GPUs anew
  (the user's own restart does; the new kernel's first output says what happened to the previous one).
- A server that stops (its user logs out, the Hub's culler, SIGINT or SIGTERM) cancels its kernels'
  jobs, queued or running, with the reason "its Jupyter server stopped"; in a Hub user's server the
  provisioner talks to the service directly (``kernels.rest``), since the server's own port closes first.

Server-side settings (``jupyter_server_config.py``)::

    c.HiveProvisioner.idle_timeout = 3600                   # default for every GPU kernel (0 = never)
    c.HiveProvisioner.idle_timeout_per_vc = {"cv-101": 900} # instructors' limit per VC (caps the above)
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import sys
import time
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Dict, Float, Int, Unicode, Union

from hive_lab_server.kernels import ports as kernel_ports
from hive_lab_server.kernels.culler import IdleCuller
from hive_lab_server.kernels.job import (
    CONNECTION_FILE,
    KERNEL_DIR,
    WATCHDOG_SLACK_S,
    duration,
    dumps_notice,
    kernel_argv,
    kernel_job_body,
    notice_lines,
)
from hive_lab_server.kernels.refusal import refused_by_service, unreachable
from hive_lab_server.kernels.rest import HiveApiError, HiveRest, find_server
from hive_lab_server.execution.staging import private_dir, write_private

log = logging.getLogger("hive_lab_server.kernels.provisioner")

FINAL = ("succeeded", "failed", "cancelled")
# notebook (JPY_SESSION_NAME) -> what happened to its previous kernel (shown by the next one)
CULLED_SESSIONS: dict[str, str] = {}


def server_stopping() -> bool:
    """The Jupyter server in this process is shutting down (its kernels are shut down with it)."""
    try:
        from jupyter_server.serverapp import ServerApp

        return ServerApp.initialized() and bool(getattr(ServerApp.instance(), "_stopping", False))
    except Exception:
        return False


def shutdown_reason(default: str) -> str:
    """Why a kernel's job is withdrawn, in words the panel, ``hive-lab jobs`` and the usage report show."""
    if server_stopping():
        return f"{default}: its Jupyter server stopped (nobody can reach this kernel any more)"
    return default


class HiveProvisioner(LocalProvisioner):
    # what the kernel asks for (kernelspec metadata.kernel_provisioner.config)
    gpus = Union([Int(), Float()], default_value=1, config=True,
                 help="GPUs the kernel holds, or a share of one GPU: 0.5, 0.25, 0.125")
    gpu_type = Unicode(None, allow_none=True, config=True, help="GPU type (None: any the VC has)")
    vc = Unicode(None, allow_none=True, config=True, help="virtual cluster (None: the server's default)")
    image = Unicode(None, allow_none=True, config=True, help="run the kernel in this container image")
    python = Unicode("python3", config=True, help="the Python that runs the kernel inside the image")
    cpus = Float(0.0, config=True, help="CPU limit (0: none)")
    memory_mb = Int(0, config=True, help="memory limit in MB (0: none)")
    time_limit_s = Float(0.0, config=True, help="run time limit of the kernel's job in seconds (0: none)")
    url = Unicode(None, allow_none=True, config=True, help="hive-lab server URL (default: HIVE_LAB_URL / this server)")
    token = Unicode(None, allow_none=True, config=True, help="token for it (default: HIVE_LAB_TOKEN / this server's)")
    # culling
    idle_timeout = Float(3600.0, config=True, help="seconds without execution before a GPU kernel is shut down (0: never)")
    idle_timeout_per_vc = Dict(config=True, help="VC name -> idle limit in seconds; caps idle_timeout for that VC")
    cull_interval_s = Float(30.0, config=True, help="how often idleness is checked")
    queue_log_interval_s = Float(30.0, config=True, help="how often a queued kernel's wait is logged")
    heartbeat_lease_s = Int(60, config=True, help="a kernel whose Jupyter server sent no heartbeat for this long stops")
    watchdog_slack_s = Int(WATCHDOG_SLACK_S, config=True,
                           help="the kernel's own watchdog stops it this long after the lease, should the service "
                                "not have ended its job by then (the fallback when the service is down too)")
    placement_wait_s = Float(10.0, config=True, help="how long launching waits for the scheduler to place or queue the kernel's job")

    job_id: str | None = None
    _rest: HiveRest | None = None
    _job: dict | None = None
    _job_fetched = 0.0
    _exits_seen = 0
    _submitted = 0.0
    _queue_reason = ""
    _watch_task: asyncio.Task | None = None
    _culler: IdleCuller | None = None
    _session = ""
    _culled = False
    _launched = True  # launch_kernel returned (Jupyter holds the connection info)
    _stop_requested: str | None = None  # shut down while its job was being submitted: withdraw it
    _ended: str | None = None  # someone else ended its job: the stand-in kernel (kernels.ended) says so
    _previous_end: str | None = None  # what ended this kernel's previous job (its next first cell says so)
    _user_restart = False  # the user asked for this restart (Kernel > Restart), not jupyter's restarter

    @property
    def waiting_for_gpus(self) -> bool:
        """The kernel's job is submitted but not placed yet (nothing answers on its ports)."""
        return self.job_id is not None and (self._job or {}).get("state") in ("submitted", "queued")

    @property
    def queue_reason(self) -> str:
        """Why the kernel's job waits (the scheduler's reason; empty once it runs or before it is known)."""
        return self._queue_reason if self.waiting_for_gpus else ""

    def _asked(self) -> str:
        """What the kernel asks for, in words: ``2 GPU(s)`` or ``a 0.25 share of a GPU``."""
        g = self.gpus
        return f"a {g:g} share of a GPU" if isinstance(g, float) and 0 < g < 1 else f"{g:g} GPU(s)"

    # ------------------------------------------------------------------ helpers

    @property
    def has_process(self) -> bool:
        return self.job_id is not None or getattr(self, "process", None) is not None

    def _client(self) -> HiveRest:
        if self._rest is None:
            url, token = find_server(self.url, self.token)
            self._rest = HiveRest(url, token)
        return self._rest

    @property
    def _workdir(self) -> pathlib.Path | None:
        wd = (self._job or {}).get("working_dir")
        return pathlib.Path(wd) if wd and os.path.isdir(wd) else None

    def _exit_count(self) -> tuple[int, int | None]:
        wd = self._workdir
        if wd is None:
            return 0, None
        try:
            lines = (wd / KERNEL_DIR / "exits").read_text().split()
        except OSError:
            return 0, None
        return len(lines), (int(lines[-1]) if lines and lines[-1].lstrip("-").isdigit() else None)

    async def _refresh(self, max_age: float = 0.0) -> dict | None:
        if self.job_id is None:
            return None
        if self._job is not None and time.monotonic() - self._job_fetched < max_age:
            return self._job
        try:
            self._job = await self._client().request("GET", f"jobs/{self.job_id}")
            self._job_fetched = time.monotonic()
        except HiveApiError as exc:
            if exc.status == 404:
                self._job = {"id": self.job_id, "state": "failed", "exit_code": None}
            else:
                log.warning("hive kernel %s: cannot read job %s: %s", self.kernel_id, self.job_id, exc)
        except Exception as exc:  # the server restarting: keep the last known state
            log.warning("hive kernel %s: cannot reach hive-lab: %s", self.kernel_id, exc)
        return self._job

    def idle_limit(self) -> float:
        limits = [t for t in (self.idle_timeout,) if t and t > 0]
        vc = (self._job or {}).get("vc") or self.vc
        if vc in self.idle_timeout_per_vc:
            limits.append(float(self.idle_timeout_per_vc[vc]))
        return min(limits) if limits else 0.0

    # ------------------------------------------------------------------ launch

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        # its ports are bound only once its job runs, maybe minutes from now: drawn below the ephemeral range,
        # where no outgoing connection is given one meanwhile (``kernels.ports``)
        km = self.parent
        if km is not None and km.transport == "tcp" and km.cache_ports and not self.ports_cached:
            chosen = kernel_ports.below_ephemeral(km.ip, 5)
            if chosen is not None:
                km.shell_port, km.iopub_port, km.stdin_port, km.hb_port, km.control_port = chosen
                self.ports_cached = True
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> dict:
        km = self.parent
        connection_file = km.connection_file
        text = pathlib.Path(connection_file).read_text()
        user_restart, self._user_restart = self._user_restart, False
        if self.job_id is not None:
            job = await self._refresh()
            if job is not None and job.get("state") not in FINAL and self._workdir is not None:
                # a restart inside the same grant: the supervisor reruns the kernel on the same GPUs
                kdir = self._workdir / KERNEL_DIR
                write_private(kdir / "connection.json", text)  # its HMAC key: 0600, still the job owner's
                self._exits_seen = self._exit_count()[0]
                (kdir / "go").write_text("")
                if self._culler is not None:
                    self._culler.reset()
                log.info("hive kernel %s: restarted inside job %s (GPUs kept)", self.kernel_id, self.job_id)
                return self.connection_info
            if job is not None and job.get("state") in FINAL and job.get("reason"):
                # e.g. preempted by a higher-priority job: the new kernel's first output says so
                self._previous_end = f"the previous kernel of this notebook ended: {job['reason']}."
                if self._session:
                    CULLED_SESSIONS.setdefault(self._session, self._previous_end)
            if job is not None and job.get("state") == "cancelled" and not user_restart:
                # cancelled by someone (an instructor, its time limit): jupyter's restarter must not ask
                # for GPUs again behind their back; the notebook is told instead, until the user restarts
                return await self._park(job, kwargs)
            await self._cancel("restart")
        elif self._ended is not None and not user_restart:
            return await self._park(None, kwargs)  # the stand-in itself was restarted
        self._ended = None
        self._launched = False
        self._stop_requested = None
        await self._submit(cmd, connection_file, text, kwargs.get("env") or {})
        await self._await_decision()
        self._launched = True
        return self.connection_info

    async def _park(self, job: dict | None, kwargs: dict) -> dict:
        """Run the stand-in kernel (``kernels.ended``) in place of a GPU kernel whose job someone else
        ended: no job, no GPU; each cell answers who ended it and why, and how to start again."""
        if job is not None:
            await self._forget_job()
            when = time.strftime("%H:%M")
            self._ended = (
                f"hive-lab: this notebook's GPU kernel (job {job['id']}) was {job.get('reason') or 'cancelled'}"
                f" (at {when}); its variables are gone and its GPUs were released. To start again, restart the "
                f"kernel (Kernel > Restart Kernel): it asks for GPUs anew."
            )
            log.warning("hive kernel %s: job %s was %s; not asking for GPUs again until the user restarts it",
                        self.kernel_id, job["id"], job.get("reason") or "cancelled")
        km = self.parent
        info = self.connection_info
        if info.get("ip") not in (None, "127.0.0.1", "localhost") and km is not None:
            km.ip = info["ip"] = "127.0.0.1"  # the stand-in runs here, not on the GPU node
            km.cleanup_connection_file()
            km.write_connection_file()
        env = dict(kwargs.get("env") or os.environ)
        env["HIVE_KERNEL_ENDED"] = self._ended or ""
        cmd = [sys.executable, "-m", "hive_lab_server.kernels.ended", "-f", km.connection_file]
        return await super().launch_kernel(cmd, **{**kwargs, "env": env})

    async def _forget_job(self) -> None:
        """Stop following the job (ended elsewhere): no culler, no watcher, nothing to cancel."""
        self.job_id = None
        if self._culler is not None:
            await self._culler.stop()
            self._culler = None
        task, self._watch_task = self._watch_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _await_decision(self) -> None:
        """Wait (at most ``placement_wait_s``) until the job is placed or queued; once placed, Jupyter
        connects to the node's address. A queued kernel returns at once (its wait is logged)."""
        deadline = time.monotonic() + self.placement_wait_s
        job = self._job or {}
        while job.get("state") == "submitted" and time.monotonic() < deadline and self.job_id is not None:
            await asyncio.sleep(0.05)
            job = await self._refresh() or {}
        if job.get("state") in ("scheduled", "running"):
            self._use_node_address(job, launched=False)
        elif job.get("state") == "queued":  # the start says why it waits (the server log, the panel, its first cell)
            self._queue_reason = job.get("reason") or ""
            log.warning("hive kernel %s waits for %s as job %s: %s", self.kernel_id, self._asked(), self.job_id,
                        self._queue_reason or "queued")

    def _use_node_address(self, job: dict, launched: bool = True) -> None:
        """Point the kernel's connection info at the node its job was placed on (``placement[].address``)."""
        placement = job.get("placement") or []
        address = placement[0].get("address") if placement else None
        info = self.connection_info
        if not address or not info or info.get("ip") == address:
            return
        previous, info["ip"] = info.get("ip"), address
        if self._culler is not None:
            self._culler.follow_address()
        km = self.parent
        if launched and km is not None and getattr(km, "ip", address) != address:
            # launched while queued: Jupyter already holds the old address; clients made from now on
            # connect to the node (the kernel manager's connection file is rewritten)
            km.ip = address
            km.cleanup_connection_file()
            km.write_connection_file()
            close_control = getattr(km, "_close_control_socket", None)
            if callable(close_control):
                close_control()  # reconnects to the new address when next used (shutdown)
            log.warning("hive kernel %s runs on %s (%s); clients opened while it was queued connected to %s and "
                        "must reconnect", self.kernel_id, placement[0].get("node"), address, previous)
        else:
            log.info("hive kernel %s is placed on %s: connecting to %s", self.kernel_id, placement[0].get("node"), address)

    async def _submit(self, cmd: list[str], connection_file: str, text: str, env: dict) -> None:
        rest = self._client()
        self._session = env.get("JPY_SESSION_NAME", "")
        job_env = {k: v for k, v in (self.kernel_spec.env or {}).items() if not k.startswith("HIVE_")}
        if self._session:
            job_env["JPY_SESSION_NAME"] = self._session
        label = os.path.basename(self._session) or self.kernel_spec.display_name or "kernel"
        body = kernel_job_body(
            name=f"kernel: {label}"[:200],
            argv=kernel_argv(list(cmd), connection_file, self.python if self.image else None),
            connection_text=text,
            url=rest.url,
            token=rest.token,
            gpus=self.gpus,
            gpu_type=self.gpu_type,
            vc=self.vc,
            image=self.image,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            env=job_env,
            lease_s=self.heartbeat_lease_s,
            watchdog_slack_s=self.watchdog_slack_s,
            time_limit_s=self.time_limit_s or None,
        )
        self._submitted = time.monotonic()
        try:
            job = await rest.request("POST", "jobs", body)
        except HiveApiError as exc:  # e.g. 403 "user ann may not submit to VC research; your VCs: cv-101"
            raise refused_by_service(exc.status, str(exc)) from None
        except OSError as exc:
            raise unreachable(rest.url, exc) from None
        if self._stop_requested is not None:
            # shut down while the request was on its way (e.g. within seconds of opening the page):
            # withdraw the job at once, or it would hold a GPU for a kernel nobody can see
            self.job_id = job["id"]
            why, self._stop_requested = self._stop_requested, None
            await self._cancel(f"{why} while starting")
            raise RuntimeError(f"hive kernel: shut down while starting; its GPU request ({job['id']}) was withdrawn")
        self.job_id = job["id"]
        self._job = job
        self._job_fetched = time.monotonic()
        self._heartbeat(create=True)
        self._exits_seen = 0
        self._culled = False
        limit = self.idle_limit()
        if limit > 0 and self.gpus > 0:
            self._culler = IdleCuller(
                self.connection_info, limit, self._cull, interval_s=self.cull_interval_s,
                gpu_uuids=lambda: [u for p in (self._job or {}).get("placement") or [] for u in (p.get("gpu_uuids") or [])],
            )
            self._culler.listen()  # subscribed before the kernel runs: no execution goes unseen
        self._watch_task = asyncio.get_running_loop().create_task(self._watch(), name=f"hive-kernel-{self.job_id}")

    def _heartbeat(self, create: bool = False) -> None:
        """Tell the kernel's supervisor that this Jupyter server still holds it (see kernels.job)."""
        wd = (self._job or {}).get("working_dir")
        if not wd or not os.path.isdir(os.path.dirname(wd)):
            return  # the jobs' dirs are not visible here: no heartbeat, the watchdog stays off
        if not create and not os.path.isdir(wd):
            return
        try:
            kdir = os.path.join(wd, KERNEL_DIR)
            private_dir(pathlib.Path(kdir))  # the job's dir too: created 0700, like the service does
            if create:
                os.chmod(kdir, 0o700)  # it holds the kernel's connection key and the user's token
                # the service ends the job, queued or running, once the heartbeat is older than this
                pathlib.Path(kdir, "lease").write_text(str(int(self.heartbeat_lease_s)))
            pathlib.Path(kdir, "alive").write_text(str(int(time.time())))
        except OSError as exc:
            log.warning("hive kernel %s: heartbeat: %s", self.kernel_id, exc)

    async def _watch(self) -> None:
        """Follow the job: log the wait, write the first-cell notice, start the idle culler, and keep
        the kernel's heartbeat fresh while it runs."""
        job_id = self.job_id
        last_log = time.monotonic()
        announced = False
        beat_every = max(0.5, self.heartbeat_lease_s / 6)
        last_beat = time.monotonic()
        while self.job_id == job_id:
            job = await self._refresh()
            state = (job or {}).get("state")
            if state in FINAL or state is None:
                return
            if time.monotonic() - last_beat >= beat_every:
                last_beat = time.monotonic()
                self._heartbeat()
            if state in ("queued", "submitted"):
                self._queue_reason = job.get("reason") or self._queue_reason
                if time.monotonic() - last_log >= self.queue_log_interval_s:
                    last_log = time.monotonic()
                    log.warning("hive kernel %s still waits for GPUs (job %s, %.0f s): %s", self.kernel_id,
                                job_id, time.monotonic() - self._submitted, self._queue_reason)
                await asyncio.sleep(0.2)
                continue
            if self._workdir is None:
                await asyncio.sleep(0.2)
                continue
            if state in ("scheduled", "running") and self._launched:
                self._use_node_address(job)
            if not announced and state in ("scheduled", "running"):
                announced = True
                self._heartbeat()
                self._on_running(job)
            await asyncio.sleep(beat_every)

    def _on_running(self, job: dict) -> None:
        waited = time.monotonic() - self._submitted
        limit = self.idle_limit()
        previous = CULLED_SESSIONS.pop(self._session, None) if self._session else None
        previous, self._previous_end = previous or self._previous_end, None  # (a kernel without a notebook too)
        lines = notice_lines(job, waited, self._queue_reason, limit, previous)
        try:
            (self._workdir / KERNEL_DIR).mkdir(exist_ok=True)
            (self._workdir / KERNEL_DIR / "notice.json").write_text(dumps_notice(lines))
        except OSError as exc:
            log.warning("hive kernel %s: cannot write its notice: %s", self.kernel_id, exc)
        if waited >= 1.0:
            log.warning("hive kernel %s got its GPUs after %.0f s (job %s)", self.kernel_id, waited, self.job_id)
        if self._culler is not None:
            self._culler.start()

    async def _cull(self, idle_s: float) -> None:
        limit = self.idle_limit()
        vc = (self._job or {}).get("vc") or self.vc
        gpus = self.gpus
        why = (f"idle kernel culled: no execution for {duration(idle_s)} while holding {gpus:g} GPU"
               f"{'s' if gpus > 1 or gpus == 0 else ''} (VC {vc} limit {duration(limit)})")
        log.warning("hive kernel %s (job %s): %s; shutting it down", self.kernel_id, self.job_id, why)
        self._culled = True
        km = self.parent
        stop_restarter = getattr(km, "stop_restarter", None)
        if callable(stop_restarter):
            # culled is shut down, not "died": without this, Jupyter's restarter sees the kernel go
            # when its job is cancelled, tells the notebook "appears to have died, will restart" and
            # starts another one (another GPU request) until the shutdown below catches up
            stop_restarter()
        if self._session:
            CULLED_SESSIONS[self._session] = (
                f"the previous kernel of this notebook was shut down at {time.strftime('%H:%M')} after "
                f"{duration(idle_s)} without execution, to release its GPUs for others."
            )
        await self._cancel(why)
        multi = getattr(km, "parent", None)
        try:
            if multi is not None and hasattr(multi, "shutdown_kernel") and hasattr(multi, "__contains__") \
                    and self.kernel_id in multi:  # (a MultiKernelManager: does it hold this kernel?)
                await asyncio.ensure_future(multi.shutdown_kernel(self.kernel_id))
            else:
                await km.shutdown_kernel(now=True)
        except Exception as exc:
            log.warning("hive kernel %s: shutting down after culling: %s", self.kernel_id, exc)

    async def _cancel(self, why: str) -> None:
        job_id = self.job_id
        if job_id is None:
            if not self._launched:
                self._stop_requested = why  # _submit withdraws the job once the server answers
            return
        await self._forget_job()
        try:
            await self._client().request("DELETE", f"jobs/{job_id}", query={"reason": why})
        except HiveApiError as exc:
            if exc.status not in (404, 409):
                log.warning("hive kernel %s: cancelling job %s: %s", self.kernel_id, job_id, exc)
        except Exception as exc:
            log.warning("hive kernel %s: cancelling job %s: %s", self.kernel_id, job_id, exc)

    # ------------------------------------------------------------------ process-like interface

    async def poll(self) -> int | None:
        if self._ended is not None:
            return await super().poll()  # the stand-in kernel's process
        if self.job_id is None:
            return 0
        count, rc = self._exit_count()
        if count > self._exits_seen:
            return rc if rc is not None else 1
        job = await self._refresh(max_age=0.25)
        if job is not None and job.get("state") in FINAL:
            code = job.get("exit_code")
            return code if code is not None else 1
        return None

    async def wait(self) -> int | None:
        if self._ended is not None:
            return await super().wait()
        while True:
            ret = await self.poll()
            if ret is not None:
                return ret
            await asyncio.sleep(0.1)

    async def send_signal(self, signum: int) -> None:
        import signal

        if self._ended is not None:
            return await super().send_signal(signum)
        if signum in (signal.SIGKILL, signal.SIGTERM):
            await self.kill()
        else:  # the kernelspec uses interrupt_mode "message"; other signals cannot cross the launcher
            log.info("hive kernel %s: signal %s not forwarded", self.kernel_id, signum)

    async def kill(self, restart: bool = False) -> None:
        if self._ended is not None:
            return await super().kill(restart=restart)
        if restart and await self.poll() is not None:
            return  # the kernel process already ended; the supervisor waits for the relaunch
        if (await self._refresh() or {}).get("state") == "cancelled":
            return  # someone else cancelled it (jupyter's restarter kills before it relaunches): keep its record
        if restart:
            log.warning("hive kernel %s: forced restart of a hung kernel; its GPUs are requested again",
                        self.kernel_id)
        await self._cancel("kernel killed" if not restart else "hung kernel restarted")

    async def terminate(self, restart: bool = False) -> None:
        if self._ended is not None:
            return await super().terminate(restart=restart)
        await self.kill(restart=restart)

    async def shutdown_requested(self, restart: bool = False) -> None:
        if restart:
            self._user_restart = True  # Kernel > Restart (the restarter kills instead): GPUs may be asked again
        if self._ended is not None:
            return  # the stand-in kernel (see _park) reads the shutdown message itself
        if not restart and server_stopping():
            await self._cancel(shutdown_reason("kernel shut down"))  # ends now, and says why in words
            return
        if not restart and (self.job_id is None or self.waiting_for_gpus
                            or (await self._refresh() or {}).get("state") in ("submitted", "queued")):
            # not running yet: withdraw the request now; otherwise the shutdown message waiting in its
            # socket would be read once it got a GPU, and the job would end "succeeded" after holding one
            await self._cancel(shutdown_reason("kernel shut down while waiting for GPUs"))
            return
        if not restart and self._workdir is not None:
            try:
                (self._workdir / KERNEL_DIR / "keep").unlink()
            except OSError:
                pass

    async def cleanup(self, restart: bool = False) -> None:
        if not restart:
            await self._cancel(shutdown_reason("kernel shut down"))
            if self._rest is not None:
                self._rest.close()
                self._rest = None
        await super().cleanup(restart=restart)

    async def get_provisioner_info(self) -> dict:
        info = await super().get_provisioner_info()
        info.update({"job_id": self.job_id})
        return info

    async def load_provisioner_info(self, provisioner_info: dict) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.job_id = provisioner_info.get("job_id")

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        return max(recommended, 10.0)

    def get_stable_start_time(self, recommended: float = 10.0) -> float:
        return recommended


__all__ = ["HiveProvisioner", "CONNECTION_FILE"]
