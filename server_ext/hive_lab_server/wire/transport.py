"""How a Python caller speaks hive-lab's REST API, whatever its HTTP library: the one place that decides
the API's prefix, the request headers, which answers may be sent again and how an error answer becomes
a sentence.

Two callers, two I/O stacks, one codec: ``hive_lab.Client`` (synchronous, ``requests``: the magics, the
CLI, the widgets) and the kernel provisioner's ``kernels.rest.HiveRest`` (asynchronous, tornado's client,
inside the Jupyter server's event loop, where a blocking call would stall every other request). Neither
builds a header, a URL or an error message of its own (tests/client/test_one_transport.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

API_PREFIX = "hive_lab/api/"
MAX_RETRY_AFTER_S = 3600.0


def api_url(base_url: str) -> str:
    """``<base_url>hive_lab/api/`` (``base_url`` with or without its trailing slash)."""
    return (base_url if base_url.endswith("/") else base_url + "/") + API_PREFIX


def request_url(api: str, path: str, query: Mapping[str, Any] | None = None) -> str:
    """``api`` + ``path`` + the query (``None`` values left out; lists repeated)."""
    pairs = {k: v for k, v in (query or {}).items() if v is not None}
    return api + path + ("?" + urlencode(pairs, doseq=True) if pairs else "")


def request_headers(token: str | None, *, json_body: bool = False) -> dict[str, str]:
    """The headers of every call: JSON answers, the token (jupyter_server's ``token`` scheme)."""
    headers = {"Accept": "application/json"}
    if json_body:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"token {token}"
    return headers


def retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """The pause a 503 asks for (its ``Retry-After``, in seconds), or None: not to be sent again. The
    server answers 503 only for requests it did nothing with (shed under load, too many unfinished jobs,
    a store that cannot write), so sending one again is safe, a submit included."""
    if status != 503:
        return None
    value = (headers.get("Retry-After") or "").strip()
    try:
        pause = float(value)
    except ValueError:  # (absent, or an HTTP date: the server sends seconds)
        return None
    return pause if 0 <= pause <= MAX_RETRY_AFTER_S else None


def error_reply(body: bytes | str | None) -> tuple[str | None, str | None]:
    """(the sentence, the field it names) of an error answer: hive-lab's ``{"error", "field"}``, the
    Hub's ``{"message"}`` or tornado's ``{"reason"}``; (None, None) when the body says nothing usable."""
    if not body:
        return None, None
    try:
        reply = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(reply, dict):
        return None, None
    message = reply.get("error") or reply.get("message") or reply.get("reason")
    field = reply.get("field")
    return (message if isinstance(message, str) else None), (field if isinstance(field, str) else None)
