"""The dashboard shown by ``%hive_status``: who I am, cluster totals, VC usage, heatmap and queue."""

from __future__ import annotations

import html

import ipywidgets as W

from .base import LiveView, error_html
from .heatmap import HeatmapView
from .queue import QueueView
from .vcs import VCUsageView


class Dashboard(LiveView):
    """All views share the client's one event stream; each refetches on its own debounce."""

    needs_bokehjs = True
    refetch_on = ("hello", "snapshot", "cluster")

    def __init__(self, client=None, *, live: bool = True, all_users: bool = True, attach_interval: float = 10.0,
                 **kwargs):
        super().__init__(client, live=live, **kwargs)
        self.paused = False
        self.header = W.HTML()
        self.vcs = VCUsageView(self.client, live=live)
        self.heatmap = HeatmapView(self.client, live=live)
        self.queue = QueueView(self.client, live=live, all_users=all_users)
        self.widget = W.VBox([self.header, W.HBox([self.vcs.widget]), self.heatmap.widget, self.queue.widget])
        self.start()
        self.attachment = None
        if live and self.client is not None and attach_interval > 0:
            from .attached import AttachmentWatch

            # nobody looking: stop sending updates (the Jupyter server would keep them all)
            self.attachment = AttachmentWatch(self._attached, interval=attach_interval).start()

    def _attached(self, attached: bool) -> None:
        """Pause while no browser is connected to this kernel; catch up when one is again."""
        if attached and self.paused:
            for view in (self, self.vcs, self.heatmap, self.queue):
                view.start()
            self.paused = False
        elif not attached and not self.paused:
            self.paused = True
            for view in (self.vcs, self.heatmap, self.queue):
                view.stop()
            LiveView.stop(self)

    def fetch(self):
        return self.client.me(), self.client.cluster()

    def render(self, data) -> None:
        me, cluster = data
        vcs = ", ".join(me.get("vcs") or []) or "none"
        self.header.value = (
            f"<div style='font-size:14px'><b>hive-lab</b> at {html.escape(self.client.base_url)} — "
            f"you are <b>{html.escape(str(me.get('user')))}</b>{' (admin)' if me.get('admin') else ''}, "
            f"VCs: {html.escape(vcs)} — <b>{cluster.get('gpus_free', '?')}</b> of "
            f"{cluster.get('gpus_total', '?')} GPUs free</div>")

    def lab_view(self) -> dict:
        return {"view": "status", "all": self.queue.all_users, "limit": self.queue.max_rows}

    def snapshot_html(self) -> str:
        return self.header.value + self.queue.snapshot_html()

    def show_error(self, message: str) -> None:
        self.header.value = error_html(message)

    def stop(self) -> None:
        if self.attachment is not None:
            self.attachment.stop()
        for view in (self.vcs, self.heatmap, self.queue):
            view.stop()
        super().stop()
