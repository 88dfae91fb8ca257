"""The one way a test waits: on a condition, with a deadline that only bounds a hang.

``wait_until(predicate, what, timeout=...)`` calls ``predicate`` until it returns something truthy and
returns that value; past ``timeout`` seconds it fails the test naming ``what`` (and the predicate's last
value). Exceptions of the types in ``ignoring`` count as "not yet" (a page still loading, a server still
starting). The timeout is never what the test checks: a fast machine and a slow one reach the same verdict,
the slow one only later. ``await wait_until_async(...)`` is the same inside an event loop; its predicate
may be a coroutine function.

A test that must show something does *not* happen waits for a later event that orders after it (a log
line, a state change), never for a fixed time.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable

DEFAULT_TIMEOUT = 60.0  # bounds a hang; never the verdict
POLL_S = 0.02


def _describe(what: str | Callable[[], str], last: Any) -> str:
    text = what() if callable(what) else what
    return f"timed out waiting for {text} (last value: {last!r})"


def _call(predicate: Callable[[], Any], ignoring: tuple[type[BaseException], ...]) -> Any:
    try:
        return predicate()
    except ignoring:
        return None


def wait_until(predicate: Callable[[], Any], what: str | Callable[[], str] = "a condition", *,
               timeout: float = DEFAULT_TIMEOUT, poll: float = POLL_S,
               ignoring: tuple[type[BaseException], ...] = ()) -> Any:
    """Call ``predicate`` until it is truthy and return its value; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        last = _call(predicate, ignoring)
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(_describe(what, last))
        time.sleep(poll)


async def wait_until_async(predicate: Callable[[], Any | Awaitable[Any]], what: str | Callable[[], str] = "a condition",
                           *, timeout: float = DEFAULT_TIMEOUT, poll: float = POLL_S, in_thread: bool = False,
                           ignoring: tuple[type[BaseException], ...] = ()) -> Any:
    """``wait_until`` for a running event loop: the loop keeps running while the test waits. A blocking
    predicate (say an HTTP request to the server under test) runs off the loop with
    ``in_thread=True``."""
    deadline = time.monotonic() + timeout
    while True:
        if in_thread:
            last = await asyncio.to_thread(_call, predicate, ignoring)
        else:
            last = _call(predicate, ignoring)
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(_describe(what, last))
        await asyncio.sleep(poll)
