"""SIGINT stops a server that runs without a terminal the way SIGTERM does (jupyter_server's clean stop).

JupyterHub stops its services and the users' servers with SIGINT, then SIGTERM ``interrupt_timeout``
later. jupyter_server handles SIGINT only when its stdin is a terminal (to ask "Shutdown this server?");
otherwise Python's default applies, and a server started from a shell script in the background inherits
SIGINT *ignored*: the Hub then waited ~30 s for the SIGTERM and a quick restart found its ports taken. A
bare KeyboardInterrupt was no better: the process ended without shutting its kernels down, and a GPU
kernel still queued started later for nobody. So a server without a terminal treats SIGINT as SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading


def stop_cleanly_on_sigint(serverapp, log) -> None:
    stop = getattr(serverapp, "_signal_stop", None)
    if stop is None or threading.current_thread() is not threading.main_thread():
        return
    if sys.stdin is not None and sys.stdin.isatty():
        return  # a person at a terminal: jupyter_server asks before it stops
    try:
        signal.signal(signal.SIGINT, stop)
    except (ValueError, OSError) as exc:  # not the main interpreter's thread
        log.warning("hive-lab: cannot handle SIGINT (%s): a stopped server may leave GPU kernel jobs behind", exc)
