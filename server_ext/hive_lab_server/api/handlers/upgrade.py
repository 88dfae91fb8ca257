"""What ``GET events`` needs to be a websocket handshake, as the server checks it and the OpenAPI document
states it (the route table, api/handlers/__init__.py): tornado's own refusals are bare or HTML 400s and 426s."""

from __future__ import annotations

import re

#: the websocket handshake's headers, as the OpenAPI document states them (the route table, api/handlers/__init__.py)
UPGRADE_HEADERS = {
    "Connection": {"type": "string", "pattern": r"^([^,]*,)*\s*[Uu][Pp][Gg][Rr][Aa][Dd][Ee]\s*(,[^,]*)*$"},
    "Upgrade": {"type": "string", "pattern": "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$"},
    "Sec-WebSocket-Version": {"type": "string", "enum": ["13"]},
    "Sec-WebSocket-Key": {"type": "string", "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"},
}
_KEY = re.compile(UPGRADE_HEADERS["Sec-WebSocket-Key"]["pattern"])


def upgrade_problem(headers) -> str | None:
    """What a request lacks to be a websocket handshake (RFC 6455 4.1), or None."""
    tokens = [token.strip().lower() for token in headers.get("Connection", "").split(",")]
    if "upgrade" not in tokens or headers.get("Upgrade", "").lower() != "websocket":
        return "send Connection: Upgrade and Upgrade: websocket"
    if headers.get("Sec-WebSocket-Version") != "13":
        return "send Sec-WebSocket-Version: 13"
    if not _KEY.match(headers.get("Sec-WebSocket-Key", "")):
        return "send Sec-WebSocket-Key: 16 random bytes in base64"
    return None


MAX_EVENT_SEQ = 10**18 - 1  # a seq the store can hold (the document's maximum for since)
