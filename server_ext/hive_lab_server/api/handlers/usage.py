"""``GET usage``: GPU-seconds, CPU-seconds and jobs per user, VC or day (accounting.py)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.api import models
from hive_lab_server.usage.accounting import UsageQueryError, check_by, parse_since
from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.api.handlers.base import HiveError, HiveHandler


class UsageHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        now = self.service.now()
        try:
            since = parse_since(self.get_argument("since", None), now)
            by = check_by(self.get_argument("by", None))
        except UsageQueryError as exc:
            raise HiveError(400, exc.message, exc.field) from None
        asked = [u for u in (self.get_argument("user", None) or "").split(",") if u]
        asked = [caller.user if u == "me" else u for u in asked]
        if caller.admin:
            users = sorted(set(asked)) or None
        else:  # everyone else sees their own usage only
            others = sorted(set(asked) - {caller.user})
            if others:
                raise HiveError(403, f"user {caller.user} may not read the usage of {others[0]}; only admins "
                                     "may read others' usage", "user")
            users = [caller.user]
        vcs = sorted({v for v in (self.get_argument("vc", None) or "").split(",") if v}) or None
        known = set(self.service.config.virtual_clusters)
        for vc in vcs or ():
            if vc not in known:
                raise HiveError(404, f"unknown VC {vc!r}; VCs: {', '.join(sorted(known))}", "vc")
        rows = self.service.usage(since=since, by=by, users=users, vcs=vcs)
        self.reply_model(models.UsageReport, {"by": by, "since": iso(since), "until": iso(now), "rows": rows})
