"""``GET history`` (admins): the store's jobs since ``since`` as a history trace (history_export.py)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.wire import models
from hive_lab_server.usage.history_export import HISTORY_COLUMNS, history_rows, live_policy
from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.base import HiveError, HiveHandler


class HistoryHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        if not caller.admin:
            raise HiveError(403, f"user {caller.user} may not export the cluster's history; only admins may")
        now = self.service.now()
        since = query.since(self, now)
        real = query.flag(self, "real_names")
        store = self.service.store
        rows = history_rows(store.jobs_in_window(since), store.usage_rows(since=since), since, now,
                            real_names=real)
        app = self.hive
        self.reply_model(models.HistoryReport, {
            "since": iso(since), "until": iso(now), "columns": list(HISTORY_COLUMNS), "jobs": rows,
            "cluster": self.service.config.to_dict(), "pseudonymised": not real,
            "policy": live_policy(app.queue_policy, app.overflow, app.backfill)})
