"""``GET usage``: GPU-seconds, CPU-seconds and jobs per user, VC or day (accounting.py)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.wire import models
from hive_lab_server.usage.accounting import BY
from hive_lab_server.jobs.lifecycle.presentation import iso
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.base import HiveError, HiveHandler


class UsageHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        now = self.service.now()
        since = query.since(self, now)
        by = query.choice(self, "by", BY, "user")
        asked = query.users(self, caller.user)
        if caller.admin:
            users = sorted(set(asked)) or None
        else:  # everyone else sees their own usage only
            others = sorted(set(asked) - {caller.user})
            if others:
                raise HiveError(403, f"user {caller.user} may not read the usage of {others[0]}; only admins "
                                     "may read others' usage", "user")
            users = [caller.user]
        vcs = sorted(set(query.names(self, "vc", "VC names"))) or None
        known = set(self.service.config.virtual_clusters)
        for vc in vcs or ():
            if vc not in known:
                raise HiveError(404, f"unknown VC {vc!r}; VCs: {', '.join(sorted(known))}", "vc")
        rows = self.service.usage(since=since, by=by, users=users, vcs=vcs)
        self.reply_model(models.UsageReport, {"by": by, "since": iso(since), "until": iso(now), "rows": rows})
