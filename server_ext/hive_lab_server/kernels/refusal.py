"""A GPU kernel the hive-lab service will not start, as the HTTP error the person starting it sees.

The provisioner raises ``KernelRefused`` (a ``tornado.web.HTTPError``) with the service's own status and
sentence ("user ann may not submit to VC research; your VCs: cv-101"). ``POST /api/kernels`` answers it
as is. jupyter_server's session handlers, which JupyterLab uses to start a notebook's kernel, turn every
error of a kernel start into a 500 (``POST /api/sessions``) or a 501 (``PATCH``: another kernel picked),
so hive-lab serves those two routes with subclasses that answer the refusal instead
(``kernels.session_handlers``).
"""

from __future__ import annotations

from tornado.web import HTTPError


class KernelRefused(HTTPError):
    """The service refused the kernel's job (4xx: what to change), or could not be asked (503)."""

    def __init__(self, status: int, message: str):
        # jupyter_server's API handlers answer {"message": log_message, "reason": reason}
        super().__init__(status, message, reason="GPU kernel refused" if status < 500 else "hive-lab unavailable")
        self.message = message

    def __str__(self) -> str:
        return self.message


def refused_by_service(status: int, message: str) -> KernelRefused:
    """What the person starting the kernel sees when the service answered ``status`` with ``message``:
    its own status for a request they can change (4xx), 503 when the service failed (5xx)."""
    if 400 <= status < 500:
        return KernelRefused(status, f"hive-lab refused the kernel's GPU request: {message}")
    return KernelRefused(503, f"hive-lab could not start the kernel's job ({status}): {message}; try again, "
                              "or ask the administrator to look at hive-lab's log")


def unreachable(url: str, error: BaseException) -> KernelRefused:
    return KernelRefused(503, f"hive kernel: cannot reach hive-lab at {url} ({error}); check HIVE_LAB_URL")
