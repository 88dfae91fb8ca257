"""Whether anybody looks at this kernel: the Jupyter server's count of websocket connections to it.

A live view (``%hive_status``) left open in a notebook nobody has open still sends an update per
change; with no browser attached, the Jupyter server keeps every such message for the session's
return, without bound. Views pause while the count is 0 and resume when a browser reconnects.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable


def own_kernel_id() -> str | None:
    """This kernel's id (from its connection file name ``kernel-<id>.json``), or None outside one."""
    try:
        from ipykernel.connect import get_connection_file

        name = os.path.basename(get_connection_file())
    except Exception:  # noqa: BLE001 - not in a kernel
        return None
    match = re.fullmatch(r"kernel-(.+)\.json", name)
    return match.group(1) if match else None


def kernel_connections(kernel_id: str, runtime_dir: str | None = None) -> int | None:
    """How many frontends the Jupyter server that runs this kernel has connected to it (None: unknown)."""
    from ..client import Client
    from ..discovery import from_runtime_files
    from ..errors import HiveLabError

    server = from_runtime_files(runtime_dir)
    if server is None:
        return None
    try:
        count = Client(server=server, timeout=5, busy_retry_s=0).kernel(kernel_id).get("connections")
        return int(count) if count is not None else None
    except (HiveLabError, AttributeError, TypeError, ValueError):  # no such kernel, not JSON, not a count
        return None


class AttachmentWatch:
    """Calls ``on_change(attached)`` when the kernel's frontends come and go, checking every
    ``interval`` s in a daemon thread. ``count()`` is injectable (tests, other servers)."""

    def __init__(self, on_change: Callable[[bool], None], *, interval: float = 10.0,
                 count: Callable[[], int | None] | None = None):
        kernel_id = own_kernel_id()
        self.count = count or ((lambda: kernel_connections(kernel_id)) if kernel_id else (lambda: None))
        self.on_change = on_change
        self.interval = interval
        self.attached = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "AttachmentWatch":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="hive-lab-attached")
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def check(self) -> bool:
        """Check once; unknown counts as attached (never pause on a guess)."""
        n = self.count()
        attached = n is None or n > 0
        if attached != self.attached:
            self.attached = attached
            self.on_change(attached)
        return attached

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a failed check changes nothing
                pass
