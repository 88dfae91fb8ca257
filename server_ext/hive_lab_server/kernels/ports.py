"""A hive kernel's ZMQ ports, chosen below the OS's ephemeral port range.

Jupyter chooses a kernel's five ports when the kernel manager starts it (``LocalPortCache``: bind port 0, let
go), so each is an ephemeral port, and the kernel binds them once it runs. A plain kernel runs at once; a hive
kernel runs once its job is placed and started: hundreds of milliseconds later on a busy machine, minutes when
it waits for a GPU. Meanwhile the OS may hand any of those ports to an outgoing connection on the node (it
draws connections' local ports from the same range), and the kernel then dies at its bind ("Address already in
use": the client sees "Kernel died before replying to kernel_info"). No connection is ever given a port below
the range, so the ports are drawn at random from below it, among those free now and not handed to another
kernel of this process (Jupyter's own ``LocalPortCache`` keeps that set, and takes them back at the kernel's
cleanup).
"""

from __future__ import annotations

import random
import socket

from jupyter_client.connect import LocalPortCache

EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST = 10000  # (the ports below are many services' well-known ones)
ROOM = 1000     # fewer ports than this below the range: Jupyter's own choice
TRIES = 200


def ephemeral_low(path: str = EPHEMERAL_RANGE) -> int | None:
    """The lowest port of the OS's ephemeral range (None where it cannot be read: not Linux)."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_now(ip: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((ip or "127.0.0.1", port))
        except OSError:
            return False
    return True


def below_ephemeral(ip: str, n: int, low: int | None = None, rng: random.Random | None = None) -> list[int] | None:
    """``n`` ports below the ephemeral range, free on ``ip`` now, marked used in Jupyter's port cache; None
    (Jupyter then chooses as it does) when the range cannot be read or leaves too little room below it."""
    low = ephemeral_low() if low is None else low
    if low is None or low - LOWEST < ROOM:
        return None
    rng = rng or random.SystemRandom()
    used = LocalPortCache.instance().currently_used_ports
    chosen: list[int] = []
    for _ in range(TRIES):
        port = rng.randrange(LOWEST, low)
        if port not in used and port not in chosen and free_now(ip, port):
            chosen.append(port)
            if len(chosen) == n:
                used.update(chosen)
                return chosen
    return None
