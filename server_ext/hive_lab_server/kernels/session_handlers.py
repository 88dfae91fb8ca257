"""jupyter_server's ``/api/sessions`` handlers, answering a refused GPU kernel with the service's status
and sentence.

JupyterLab starts a notebook's kernel with ``POST /api/sessions`` and switches kernels with ``PATCH
/api/sessions/{id}``. jupyter_server catches every error of the kernel start there and answers 500
(POST, the error's text) or 501 (PATCH, its ``repr``), so a student over a limit read "500" and an
error dump. These subclasses change nothing else: while one request runs, the session manager it sees
remembers a ``KernelRefused`` raised by the kernel start, and the reply is that refusal's status with
``{"message": sentence, "reason": ...}``, as ``POST /api/kernels`` answers it. The Lab shows ``message``
in its "Error Starting Kernel" dialog (and the hive-lab extension as a notification).
"""

from __future__ import annotations

import json

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.services.sessions.handlers import SessionHandler, SessionRootHandler, _session_id_regex

from hive_lab_server.kernels.refusal import KernelRefused


class _RefusalRecorder:
    """The server's session manager, for one request: a kernel start that the service refused is kept."""

    def __init__(self, manager):
        self._manager = manager
        self.refused: KernelRefused | None = None

    def __getattr__(self, name):
        return getattr(self._manager, name)

    async def _recording(self, call, *args, **kwargs):
        try:
            return await call(*args, **kwargs)
        except KernelRefused as exc:
            self.refused = exc
            raise

    async def create_session(self, *args, **kwargs):
        return await self._recording(self._manager.create_session, *args, **kwargs)

    async def start_kernel_for_session(self, *args, **kwargs):
        return await self._recording(self._manager.start_kernel_for_session, *args, **kwargs)


class _AnswersRefusals(JupyterHandler):
    """Put before jupyter_server's session handlers: their 500 for a refused GPU kernel becomes its refusal."""

    # still jupyter_server's sessions API (kernels started as the server's user): the shared mode's
    # HiveLabAuthorizer keeps it to admins, as it does jupyter_server's own handler
    jupyter_server_api = True
    _recorder: _RefusalRecorder | None = None

    @property
    def session_manager(self):
        if self._recorder is None:
            self._recorder = _RefusalRecorder(self.settings["session_manager"])
        return self._recorder

    def finish(self, chunk=None):
        refused = self._recorder.refused if self._recorder is not None else None
        if refused is None or self._finished:
            return super().finish(chunk)
        # jupyter_server's own error reply for this request (500/501) is replaced by the refusal
        self._recorder.refused = None
        self.clear()
        self.set_status(refused.status_code, reason=refused.reason)
        self.set_header("Content-Type", "application/json")
        self.log.warning("hive-lab: GPU kernel not started (%s): %s", refused.status_code, refused.message)
        return super().finish(json.dumps({"message": refused.message, "reason": refused.reason}))


class HiveSessionRootHandler(_AnswersRefusals, SessionRootHandler):
    """``POST /api/sessions`` (a notebook opened with a kernel)."""


class HiveSessionHandler(_AnswersRefusals, SessionHandler):
    """``PATCH /api/sessions/{id}`` (another kernel picked for an open notebook)."""


# served ahead of jupyter_server's own routes (an extension's handlers are matched first)
SESSION_ROUTES = [
    (r"/api/sessions/%s" % _session_id_regex, HiveSessionHandler),
    (r"/api/sessions", HiveSessionRootHandler),
]
