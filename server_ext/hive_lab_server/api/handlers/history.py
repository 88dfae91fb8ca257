"""``GET history`` (admins): the store's jobs since ``since`` as a history trace (history_export.py)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.api import models
from hive_lab_server.usage.accounting import UsageQueryError, parse_since
from hive_lab_server.usage.history_export import HISTORY_COLUMNS, history_rows, live_policy
from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.api.handlers.base import HiveError, HiveHandler

TRUE, FALSE = ("1", "true", "yes"), ("", "0", "false", "no")


class HistoryHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        if not caller.admin:
            raise HiveError(403, f"user {caller.user} may not export the cluster's history; only admins may")
        now = self.service.now()
        try:
            since = parse_since(self.get_argument("since", None), now)
        except UsageQueryError as exc:
            raise HiveError(400, exc.message, exc.field) from None
        real = (self.get_argument("real_names", "") or "").strip().lower()
        if real not in TRUE + FALSE:
            raise HiveError(400, f"real_names must be true or false, got {real!r}", "real_names")
        store = self.service.store
        rows = history_rows(store.jobs_in_window(since), store.usage_rows(since=since), since, now,
                            real_names=real in TRUE)
        app = self.hive
        self.reply_model(models.HistoryReport, {
            "since": iso(since), "until": iso(now), "columns": list(HISTORY_COLUMNS), "jobs": rows,
            "cluster": self.service.config.to_dict(), "pseudonymised": real not in TRUE,
            "policy": live_policy(app.queue_policy, app.overflow, app.backfill)})
