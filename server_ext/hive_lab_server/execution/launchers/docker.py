"""``docker`` launcher: every task of a placed job is a container (docker SDK).

What a container may see is decided in ``docker_spec`` (mounts, limits, GPUs by UUID, no privileges);
log copying and exit watching in ``docker_watch``. Every blocking SDK call runs in a thread pool, never
on the event loop. Containers carry the labels ``hive-lab.job``, ``hive-lab.task``, ``hive-lab.owner``,
``hive-lab.kind`` and ``hive-lab.instance`` (one hive-lab server's containers, when several share an
engine), so ``running()`` finds them again after a restart. A container is removed once its exit has
been recorded and its logs copied; containers that ended while the server was down are still listed by
``running()`` and, once adopted, report their real exit code.

Jobs that name no image run as local processes (a ``LocalLauncher`` inside this one), unless
``default_image`` is set, in which case every job runs in a container. Configure it in
``jupyter_server_config.py``::

    c.HiveLabApp.launcher = "docker"          # the default "auto" picks docker when an engine answers
    c.DockerLauncher.allowed_mount_roots = ["/datasets", "/scratch"]
    c.DockerLauncher.network_mode = "none"     # isolate containers (default "host")
    c.DockerLauncher.default_image = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
    c.DockerLauncher.base_url = "unix:///run/docker.sock"   # default: DOCKER_HOST / the default socket
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from traitlets import Bool, Float, List, Unicode

from hive_lab_server.execution.launchers.base import CHECKPOINT_SIGNAL, LaunchError, LaunchRequest, Launcher, TaskExit
from hive_lab_server.execution.launchers.docker_spec import (
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_KIND,
    LABEL_LOG,
    LABEL_OWNER,
    LABEL_TASK,
    ContainerPolicy,
    container_kwargs,
)
from hive_lab_server.execution.launchers.docker_watch import ContainerWatcher

log = logging.getLogger(__name__)


def engine_reachable(base_url: str | None = None, timeout: float = 2.0) -> bool:
    """Whether a Docker engine answers (``DOCKER_HOST`` or the default socket when ``base_url`` is None)."""
    try:
        import docker

        client = docker.DockerClient(base_url=base_url, timeout=timeout) if base_url else docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


class DockerLauncher(Launcher):
    name = "docker"
    supports_images = True
    needs_gpu_group = True  # the NVIDIA runtime hands a container the host's own GPU nodes (docker_spec)

    base_url = Unicode(None, allow_none=True, config=True,
                       help="the Docker engine, e.g. unix:///run/docker.sock (default: DOCKER_HOST or the default socket)")
    allowed_mount_roots = List(Unicode(), config=True,
                               help="host dirs a job's data_dir/output_dir may lie under (besides its working dir)")
    network_mode = Unicode("host", config=True, help='containers\' network: "host", "none" (isolated), "bridge", ...')
    user = Unicode(None, allow_none=True, config=True,
                   help='"uid:gid" every container runs as (default: the image\'s user)')
    default_image = Unicode(None, allow_none=True, config=True,
                            help="image for jobs that name none; unset: such jobs run as local processes")
    pull_missing = Bool(True, config=True, help="pull an image the engine does not have")
    instance = Unicode("default", config=True,
                       help="this server's name in container labels (default: derived from jobs_root), so servers "
                            "sharing an engine keep apart")
    remove_containers = Bool(True, config=True, help="remove a container once its exit and logs are recorded")
    timeout = Float(60.0, config=True, help="seconds a Docker API call may take")

    def __init__(self, base_url: str | None = None, *, state_dir: str | None = None, jobs_root: str | None = None,
                 parent: Any = None, config: Any = None, **traits: Any):
        traits = {k: v for k, v in traits.items() if k in self.class_trait_names() and v is not None}
        if base_url is not None:
            traits["base_url"] = base_url
        super().__init__(parent=parent, config=config, **traits)
        if self.instance == "default" and jobs_root:
            # one hive-lab server's containers, when several servers (or test sessions) share an engine
            self.instance = hashlib.sha1(str(jobs_root).encode()).hexdigest()[:12]
        self.policy = ContainerPolicy(
            allowed_mount_roots=tuple(self.allowed_mount_roots),
            network_mode=self.network_mode,
            user=self.user,
            default_image=self.default_image,
        )
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="hive-docker")
        self._client = None
        self._client_lock = threading.Lock()
        self._watchers: dict[str, dict[str, ContainerWatcher]] = {}  # job -> task -> watcher
        self._stopping: set[str] = set()
        self._exits: list[tuple[TaskExit, str]] = []  # (exit, its container's id)
        # an ended container stays until the service stored its exit (ack): a restart in between finds
        # it (running() lists it, adopt() reports its exit again) instead of calling the task lost
        self._unacked: dict[tuple[str, str], str] = {}
        self._exits_lock = threading.Lock()
        # imageless jobs run as local processes when no default image is set
        self._local = None
        self._local_jobs: set[str] = set()
        from hive_lab_server.execution.isolation import Isolation

        self.isolation = Isolation(parent=parent) if parent is not None else Isolation.server_identity()
        if state_dir is not None and not self.default_image:
            from hive_lab_server.execution.launchers.local import LocalLauncher

            # c.LocalLauncher applies to them
            self._local = LocalLauncher(state_dir=state_dir, isolation=self.isolation, jobs_root=jobs_root, parent=self)

    # --- plumbing

    def client(self):
        """A shared DockerClient; recreated after ``reset_client`` (daemon restart)."""
        with self._client_lock:
            if self._client is None:
                import docker

                if self.base_url:
                    self._client = docker.DockerClient(base_url=self.base_url, timeout=self.timeout, max_pool_size=64)
                else:
                    self._client = docker.from_env(timeout=self.timeout, max_pool_size=64)
            return self._client

    async def _call(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _report(self, exit_: TaskExit, container_id: str = "") -> None:
        with self._exits_lock:
            self._exits.append((exit_, container_id))
            tasks = self._watchers.get(exit_.job_id)
            if tasks is not None:
                tasks.pop(exit_.task, None)
                if not tasks:
                    self._watchers.pop(exit_.job_id, None)

    def _labels(self, request: LaunchRequest, task) -> dict[str, str]:
        labels = {f"hive-lab.label.{k}": str(v) for k, v in request.labels.items()}
        labels.update(
            {
                LABEL_JOB: request.job_id,
                LABEL_TASK: task.task,
                LABEL_OWNER: request.user or task.user,
                LABEL_KIND: request.kind,
                LABEL_INSTANCE: self.instance,
                LABEL_LOG: task.log_path,
            }
        )
        return labels

    def _watch(self, job_id: str, task: str, container_id: str, log_path: str, append: bool = False) -> None:
        watcher = ContainerWatcher(
            self.client,
            container_id,
            job_id,
            task,
            log_path,
            report=self._report,
            stopped_by_us=lambda: job_id in self._stopping,
            append=append,
        )
        with self._exits_lock:
            self._watchers.setdefault(job_id, {})[task] = watcher
        watcher.start()

    # --- image

    def _ensure_image(self, image: str) -> None:
        import docker.errors

        client = self.client()
        try:
            client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as exc:
            raise LaunchError(f"image {image!r}: the Docker engine refused to inspect it: {exc.explanation or exc}")
        if not self.pull_missing:
            raise LaunchError(f"image {image!r} is not on this node (pulling is disabled)")
        try:
            client.images.pull(image)
        except Exception as exc:
            detail = getattr(exc, "explanation", None) or str(exc)
            raise LaunchError(f"image {image!r} is not on this node and could not be pulled: {detail}") from None

    # --- Launcher interface

    @staticmethod
    def _remove_previous(client, name: str, timeout_s: float = 30.0) -> None:
        """The ended container of the task's previous attempt goes (a job paused, migrated or preempted
        starts again under the same name); when ``poll`` is removing it already, wait until it is gone."""
        import docker.errors

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                old = client.containers.get(name)
                if old.status in ("running", "restarting", "paused"):
                    raise LaunchError(f"a container {name!r} for this task is already running")
                old.remove(force=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _start_sync(self, request: LaunchRequest) -> list[tuple[str, str, str]]:
        import docker.errors

        policy = self.policy
        if request.kind == "kernel":  # Jupyter reaches the kernel on its connection file's ports
            policy = dataclasses.replace(policy, network_mode="host")
        owner = self.task_owner(request.user)  # the owner's account (c.Isolation), else DockerLauncher.user
        if owner is not None:
            from hive_lab_server.execution.isolation.gpu_access import gpu_group_gid

            policy = dataclasses.replace(policy, user=f"{owner[0]}:{owner[1]}",
                                         gpu_gid=gpu_group_gid(self.isolation.gpu_group))
        specs = [(t, container_kwargs(t, self._labels(request, t), policy)) for t in request.tasks]
        for image in sorted({kw["image"] for _, kw in specs}):
            self._ensure_image(image)
        client = self.client()
        created = []
        try:
            for task, kwargs in specs:
                self._remove_previous(client, kwargs["name"])
                container = client.containers.create(**kwargs)
                created.append((task, container))
            for _, container in created:
                container.start()
        except Exception as exc:
            for _, container in created:
                try:
                    container.remove(force=True)
                except Exception:
                    pass
            if isinstance(exc, LaunchError):
                raise
            detail = getattr(exc, "explanation", None) or str(exc)
            raise LaunchError(f"docker could not start job {request.job_id}: {detail}") from None
        return [(t.task, c.id, t.log_path) for t, c in created]

    def _is_local(self, request: LaunchRequest) -> bool:
        return self._local is not None and not any(t.image for t in request.tasks)

    async def start(self, request: LaunchRequest) -> None:
        if self._is_local(request):
            self._local_jobs.add(request.job_id)
            return await self._local.start(request)
        self._stopping.discard(request.job_id)
        started = await self._call(self._start_sync, request)
        for task, cid, log_path in started:
            self._watch(request.job_id, task, cid, log_path, append=True)

    def _containers(self, job_id: str | None = None, all_: bool = True) -> list:
        filters = {"label": [f"{LABEL_INSTANCE}={self.instance}"]}
        if job_id is not None:
            filters["label"].append(f"{LABEL_JOB}={job_id}")
        import docker.errors

        for attempt in range(5):  # list() looks each container up: one removed meanwhile raises NotFound
            try:
                return self.client().containers.list(all=all_, filters=filters)
            except docker.errors.NotFound:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _stop_sync(self, job_id: str, grace_s: float) -> None:
        containers = self._containers(job_id)
        threads = [
            threading.Thread(target=self._stop_one, args=(c, grace_s), daemon=True)
            for c in containers
            if c.status not in ("exited", "dead")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if job_id not in self._watchers:  # not tracked (e.g. found after a restart): clean up here
            for c in containers:
                try:
                    c.remove(force=True)
                except Exception:
                    pass

    @staticmethod
    def _stop_one(container, grace_s: float) -> None:
        try:
            container.stop(timeout=max(0, int(round(grace_s))))
        except Exception as exc:
            log.warning("docker: stopping %s: %s; killing it", container.name, exc)
            try:
                container.kill()
            except Exception:
                pass

    def _checkpoint_sync(self, job_id: str, grace_s: float) -> None:
        """SIGUSR1 to each running container (docker-init forwards it to the command's process), then
        wait until they have all exited or ``grace_s`` passed."""
        deadline = time.monotonic() + max(0.0, grace_s)
        live = [c for c in self._containers(job_id, all_=False)]
        for c in live:
            try:
                c.kill(signal=CHECKPOINT_SIGNAL)
            except Exception as exc:  # gone meanwhile: nothing to checkpoint
                log.debug("docker: checkpoint signal to %s: %s", c.name, exc)
        while live and time.monotonic() < deadline:
            time.sleep(0.05)
            live = [c for c in self._containers(job_id, all_=False)]

    async def checkpoint(self, job_id: str, grace_s: float) -> None:
        if job_id in self._local_jobs:
            return await self._local.checkpoint(job_id, grace_s)
        await self._call(self._checkpoint_sync, job_id, grace_s)

    async def stop(self, job_id: str, grace_s: float) -> None:
        if job_id in self._local_jobs:
            return await self._local.stop(job_id, grace_s)
        self._stopping.add(job_id)
        await self._call(self._stop_sync, job_id, grace_s)
        watchers = list(self._watchers.get(job_id, {}).values())
        # the watchers copy the last log bytes and record the exits
        await self._call(lambda: [w.finished.wait(30) for w in watchers])

    def _remove(self, container_ids: list[str]) -> None:
        import docker.errors

        for cid in container_ids:
            try:
                self.client().api.remove_container(cid, force=True)
            except docker.errors.NotFound:
                pass
            except Exception as exc:  # housekeeping: the exit is recorded regardless
                log.warning("docker: could not remove container %s: %s", cid[:12], exc)

    async def poll(self) -> list[TaskExit]:
        with self._exits_lock:
            taken, self._exits = self._exits, []
        for e, _ in taken:
            if e.job_id not in self._watchers:
                self._stopping.discard(e.job_id)
        for e, cid in taken:
            if cid:
                self._unacked[(e.job_id, e.task)] = cid
        out = [e for e, _ in taken]
        if self._local is not None:
            local_exits = await self._local.poll()
            out += local_exits
            for e in local_exits:
                if not (await self._local.running()).get(e.job_id):
                    self._local_jobs.discard(e.job_id)
        return out

    def ack(self, exits: list[TaskExit]) -> None:
        """The service stored these exits: only now do their containers (and Docker's copy of the logs) go."""
        done = [cid for cid in (self._unacked.pop((e.job_id, e.task), None) for e in exits) if cid]
        if done and self.remove_containers:
            self._pool.submit(self._remove, done)  # off the event loop; Docker answers in its own time
        if self._local is not None:
            self._local.ack(exits)

    async def running(self) -> dict[str, set[str]]:
        """Every container of this instance that is not removed yet, running or ended while unwatched."""
        containers = await self._call(self._containers)
        out: dict[str, set[str]] = {}
        for c in containers:
            labels = c.labels or {}
            out.setdefault(labels.get(LABEL_JOB, ""), set()).add(labels.get(LABEL_TASK, ""))
        out.pop("", None)
        if self._local is not None:
            local = await self._local.running()
            self._local_jobs |= set(local)
            for job_id, tasks in local.items():
                out.setdefault(job_id, set()).update(tasks)
        return out

    async def adopt(self, request: LaunchRequest) -> None:
        if request.job_id in self._local_jobs:
            return await self._local.adopt(request)
        containers = await self._call(self._containers, request.job_id)
        by_task = {(c.labels or {}).get(LABEL_TASK): c for c in containers}
        for task in request.tasks:
            if task.task in self._watchers.get(request.job_id, {}):
                continue
            container = by_task.get(task.task)
            if container is None:
                self._report(TaskExit(request.job_id, task.task, None, "lost: no container found"))
                continue
            self._watch(request.job_id, task.task, container.id, task.log_path)

    def task_pids(self) -> dict[int, str]:
        return self._local.task_pids() if self._local is not None else {}  # (imageless jobs run locally)

    def task_containers(self) -> dict[str, str]:
        return {w.container_id: job_id for job_id, by_task in list(self._watchers.items())
                for w in list(by_task.values()) if w.container_id}

    def task_owner(self, user: str) -> tuple[int, int] | None:
        """Containers run as the owner's Unix account when ``c.Isolation`` gives one (the server runs as
        root), else as ``c.DockerLauncher.user`` ("uid[:gid]") when it is set."""
        from hive_lab_server.execution.isolation import AccountError

        try:
            account = self.isolation.account_for(user)
        except AccountError as exc:
            raise LaunchError(str(exc)) from None
        if account is not None:
            return account.uid, account.gid
        uid, _, gid = (self.policy.user or "").partition(":")
        if not uid.isdigit() or int(uid) == os.geteuid():
            return None
        return int(uid), int(gid) if gid.isdigit() else int(uid)

    def host_address(self, node: str) -> str:
        """Every container runs on this engine's host; kernels always use its network ("host")."""
        return "127.0.0.1"

    async def close(self) -> None:
        if self._local is not None:
            await self._local.close()
        for tasks in list(self._watchers.values()):
            for w in list(tasks.values()):
                w.close()
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await self._call(client.close)
        self._pool.shutdown(wait=False)
