"""Shared plumbing of the live views: a client, a debounced refetch driven by the event stream."""

from __future__ import annotations

import html
import logging
import threading

from ..live import Debouncer, LiveFeed
from .lab_views import VIEW_MIME

log = logging.getLogger(__name__)


class LiveView:
    """Subclasses set ``self.widget`` and implement ``fetch()`` (network) and ``render(data)``."""

    #: the ipywidget the view draws into (each subclass builds it in its ``__init__``)
    widget: object

    #: event types that make this view refetch
    refetch_on: tuple[str, ...] = ("hello", "snapshot", "job", "cluster", "vcs")

    def __init__(self, client=None, *, live: bool = True, debounce: float = 0.3, min_interval: float = 1.0,
                 poll_interval_s: float | None = None):
        if client is None and live:
            from ..client import Client

            client = Client()
        self.client = client
        self.error: str | None = None
        self._render_lock = threading.Lock()
        self._debouncer = Debouncer(self.refresh, delay=debounce, min_interval=min_interval)
        self._unsubscribe = None
        self._live = live
        # readings that change without an event (GPU utilisation): also refetch every poll_interval_s
        self.poll_interval_s = poll_interval_s
        self._poll_stop: threading.Event | None = None

    def start(self) -> "LiveView":
        """Fetch once, then follow the event stream (when live)."""
        if self.client is not None:
            self.refresh()
        if self._live and self.client is not None and self._unsubscribe is None:
            self._unsubscribe = LiveFeed.for_client(self.client).subscribe(self.on_event)
        if self._live and self.client is not None and self.poll_interval_s and self._poll_stop is None:
            self._poll_stop = stop = threading.Event()
            threading.Thread(target=self._poll, args=(stop,), daemon=True, name="hive-lab-view-poll").start()
        return self

    def _poll(self, stop: threading.Event) -> None:
        while not stop.wait(self.poll_interval_s):
            self._debouncer.trigger()

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._poll_stop is not None:
            self._poll_stop.set()
            self._poll_stop = None
        self._debouncer.cancel()

    def on_event(self, message: dict) -> None:
        if message.get("type") in self.refetch_on:
            self._debouncer.trigger()

    def refresh(self) -> None:
        try:
            data = self.fetch()
        except Exception as exc:  # noqa: BLE001 - shown in the view, the stream keeps going
            self.error = str(exc)
            log.debug("refresh failed", exc_info=True)
            self.show_error(self.error)
            return
        self.error = None
        with self._render_lock:
            self.render(data)

    # subclasses ------------------------------------------------------------------------------------
    def fetch(self):
        raise NotImplementedError

    def render(self, data) -> None:
        raise NotImplementedError

    def show_error(self, message: str) -> None:
        pass

    # display ---------------------------------------------------------------------------------------
    needs_bokehjs = False

    def lab_view(self) -> dict | None:
        """What hive-lab's JupyterLab extension needs to draw this view itself (``VIEW_MIME``): which
        view and its filter. None: the view is a widget only."""
        return None

    def snapshot_html(self) -> str:
        """The view as static HTML, stamped with the time: what a frontend with neither the extension
        nor a live kernel shows (a saved notebook on GitHub, nbviewer)."""
        return ""

    def _repr_mimebundle_(self, **kwargs):
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        view = self.lab_view()
        if view is not None:
            # the extension ranks VIEW_MIME before the widget: JupyterLab and Notebook 7 draw the view
            # from the server, live across kernel restarts; other frontends keep the widget or the HTML
            bundle[VIEW_MIME] = view
            snapshot = self.snapshot_html()
            if snapshot:
                bundle["text/html"] = snapshot
        return bundle

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self.needs_bokehjs:
            load_bokehjs()
        display(self._repr_mimebundle_(), raw=True)


_bokehjs_loaded = False


def load_bokehjs() -> None:
    """Put BokehJS into the page once per kernel (jupyter_bokeh's widget needs it), inline so it works
    without internet access."""
    global _bokehjs_loaded
    if _bokehjs_loaded:
        return
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(resources=INLINE, hide_banner=True)
    _bokehjs_loaded = True


def error_html(message: str) -> str:
    return f'<div style="color:#b00020">⚠ {html.escape(message)}</div>'
