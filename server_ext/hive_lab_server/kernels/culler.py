"""Idle culling of GPU kernels: a kernel that holds GPUs and has executed nothing for too long goes.

The culler listens to the kernel's IOPub broadcast like any frontend does (a SUB socket; nothing is
sent to the kernel), so it sees every execution whoever asked for it: ``status: busy/idle`` messages
whose parent is an ``execute_request``. Where NVML knows the kernel's GPUs (by UUID), a GPU that is
busy counts as activity too, so a long training loop started from a cell is never "idle".

Idle time counts from the moment the kernel is up: its first IOPub message (a kernel publishes its
status when it starts and when a frontend asks for ``kernel_info`` on connecting), not from the moment
its process was launched, so a kernel that is slow to start (a loaded node, a big image) is never
culled before anyone could use it. A kernel that never says anything is counted from its launch after
``startup_grace_s``: it still cannot hold its GPUs forever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Awaitable, Callable

log = logging.getLogger(__name__)


def gpu_busy(uuids: list[str], nvml=None) -> bool | None:
    """Whether any of these GPUs shows utilisation now; None where NVML cannot tell.

    ``nvml``: the ``pynvml`` module (default) or anything with its API (the fake NVML in tests).
    """
    if not uuids:
        return None
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:
        return None
    try:
        wanted, seen = set(uuids), set()
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            if uuid in wanted:
                seen.add(uuid)
                if nvml.nvmlDeviceGetUtilizationRates(handle).gpu > 0:
                    return True
        return False if seen else None
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


class IdleCuller:
    def __init__(
        self,
        connection_info: dict,
        limit_s: float,
        on_idle: Callable[[float], Awaitable[None]],
        *,
        interval_s: float = 30.0,
        gpu_uuids: Callable[[], list[str]] = lambda: [],
        startup_grace_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        max_message_bytes: int = -1,
    ):
        self.max_message_bytes = max_message_bytes  # (-1: ZMQ's default, none) a bigger message drops the connection
        self.connection_info = connection_info
        self.limit_s = limit_s
        self.on_idle = on_idle
        self.interval_s = interval_s
        self.gpu_uuids = gpu_uuids
        self.startup_grace_s = startup_grace_s
        self.clock = clock
        self.started_at = clock()
        self.last_activity = self.started_at
        self.executing = False
        self.up = False  # the kernel has published on IOPub since it (re)started
        self._task: asyncio.Task | None = None
        self._listener: asyncio.Task | None = None
        self._socket = None
        self._endpoint = ""

    def listen(self) -> None:
        """Subscribe to IOPub now (before the kernel runs), so no execution is ever missed."""
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen(), name="hive-kernel-iopub")

    def start(self) -> None:
        """The kernel runs: idle time counts from now; check it every ``interval_s``."""
        self.listen()
        self.reset()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="hive-kernel-culler")

    def reset(self) -> None:
        """The kernel (re)started: its idle time counts from when it is up (or from now, after the grace)."""
        self.started_at = self.last_activity = self.clock()
        self.executing = False
        self.up = False

    def count_from(self, at: float) -> None:
        """Idle time counts from ``at`` (on ``clock``): the kernel started then, before this culler was made."""
        self.started_at = self.last_activity = min(at, self.clock())

    async def stop(self) -> None:
        for name in ("_task", "_listener"):
            task = getattr(self, name)
            setattr(self, name, None)
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def close(self) -> None:
        """``stop`` without waiting, from synchronous code: the socket closes once its listener ends."""
        sock, self._socket = self._socket, None
        listener, task = self._listener, self._task
        self._listener = self._task = None
        for t in (task, listener):
            if t is not None and t is not asyncio.current_task():
                t.cancel()
        if sock is not None:
            if listener is not None and not listener.done():
                listener.add_done_callback(lambda _t: sock.close(linger=0))
            else:
                sock.close(linger=0)

    def _iopub(self) -> str:
        info = self.connection_info
        return f"{info.get('transport', 'tcp')}://{info['ip']}:{info['iopub_port']}"

    def follow_address(self) -> None:
        """The connection info changed (the kernel was placed on another node): listen there."""
        sock, new = self._socket, self._iopub()
        if sock is not None and self._endpoint != new:
            sock.disconnect(self._endpoint)
            sock.connect(new)
            self._endpoint = new

    def idle_for(self) -> float:
        if self.executing:
            return 0.0
        now = self.clock()
        if not self.up:  # still starting: not idle, unless it never comes up at all
            return max(0.0, now - self.started_at - self.startup_grace_s)
        return now - self.last_activity

    def _on_message(self, frames: list[bytes]) -> None:
        try:  # the header first: only status messages (small) are parsed further, not every output
            i = frames.index(b"<IDS|MSG>")
            header = json.loads(frames[i + 2])
            if not isinstance(header, dict) or header.get("msg_type") != "status":
                return
            parent = json.loads(frames[i + 3])
            content = json.loads(frames[i + 5])
        except (ValueError, IndexError):
            return
        if not isinstance(parent, dict) or not isinstance(content, dict):
            return
        if not self.up:  # the kernel is up: idle time counts from here
            self.up = True
            self.last_activity = self.clock()
        if parent.get("msg_type") in ("execute_request", "kernel_info_request"):
            # executing, or a frontend attaching (kernel_info is what every client sends on connect)
            self.executing = parent.get("msg_type") == "execute_request" and content.get("execution_state") == "busy"
            self.last_activity = self.clock()

    async def _listen(self) -> None:
        import zmq
        import zmq.asyncio

        ctx = zmq.asyncio.Context.instance()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        if self.max_message_bytes > 0:
            sock.setsockopt(zmq.RCVHWM, 16)  # a bounded backlog too (a kernel's output can be large)
        # the kernel binds later (maybe after a long queue): keep trying, join within ~0.2 s once it does
        sock.setsockopt(zmq.RECONNECT_IVL, 10)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
        self._endpoint = self._iopub()
        sock.connect(self._endpoint)
        self._socket = sock
        while True:
            self._on_message(await sock.recv_multipart())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(min(self.interval_s, max(self.limit_s / 4, 0.2)))
            listener = self._listener
            if listener is not None and listener.done() and not listener.cancelled() and listener.exception():
                log.warning("hive kernel culler: IOPub listener failed (%s); not culling", listener.exception())
                return
            idle = self.idle_for()
            if idle < self.limit_s:
                continue
            busy = await asyncio.get_running_loop().run_in_executor(None, gpu_busy, self.gpu_uuids())
            if busy:
                self.last_activity = self.clock()
                continue
            self._task = None  # on_idle may stop() this culler
            await self.on_idle(idle)
            return
