"""cluster, vcs, me, and the admins' node/GPU drains and health marks."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.wire import models
from hive_lab_server.auth.access import serves_many
from hive_lab_server.jobs.lifecycle import presentation
from hive_lab_server.api.handlers.base import HiveError, HiveHandler


class ClusterHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply_model(models.Cluster, {**presentation.cluster_object(self.service), "launcher": self.hive.launcher_info,
                                             "hardware": self.hive.hardware_info})


class VcsHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply_model(models.VcList, presentation.vcs_object(self.service, self.caller().may_submit))


class MeHandler(HiveHandler):
    never_shed = ("GET",)  # says the server is alive, also under load

    @web.authenticated
    @authorized
    def get(self) -> None:
        c = self.caller()
        self.reply_model(models.Me, {"user": c.user, "admin": c.admin, "vcs": list(c.vcs), "groups": list(c.groups),
                                     "limits": self.limits.effective_limits(c.user, c.groups, c.vcs),
                                     "shared": serves_many(self)})


class VcLimitsHandler(HiveHandler):
    """A VC's per-user limits: anyone who may use the VC reads them; admins replace them."""

    def _vc(self, vc: str) -> str:
        if vc not in self.hive.access.all_vcs:
            raise HiveError(404, f"VC {vc} does not exist; use one of: {', '.join(self.hive.access.all_vcs)}", "vc")
        return vc

    @web.authenticated
    @authorized
    def get(self, vc: str) -> None:
        caller = self.caller()
        if not caller.may_submit(self._vc(vc)):
            raise HiveError(403, f"user {caller.user} may not use VC {vc}, so not read its limits; your VCs: "
                                 f"{', '.join(caller.vcs) or 'none'}", "vc")
        self.reply_model(models.VcLimits, self.service_call(self.limits.limits_object, vc))

    @web.authenticated
    @authorized
    def put(self, vc: str) -> None:
        caller = self.caller()
        if not caller.admin:
            raise HiveError(403, f"user {caller.user} may not change the limits of VC {vc}; only admins may")
        body = self.json_body()
        self.reply_model(models.VcLimits, self.service_call(self.limits.set_limits, self._vc(vc), body, caller.user))


class DrainHandler(HiveHandler):
    @web.authenticated
    @authorized
    async def post(self, node: str, gpu: str | None, action: str) -> None:
        caller = self.caller()
        if not caller.admin:
            raise HiveError(403, f"user {caller.user} may not {action} node {node}; only admins may")
        index = None
        if gpu is not None:
            try:
                index = int(gpu)
            except ValueError:
                raise HiveError(400, f"GPU index must be an integer, got {gpu!r}", "index") from None
        if action == "healthy":  # a bad GPU was reset or repaired (hardware health)
            try:
                fixed = await self.hive.hardware.mark_healthy(node, index)
            except KeyError as exc:
                raise HiveError(404, str(exc.args[0])) from None
            self.reply_model(models.Healthy, {"node": node, "gpu": index, "healthy": True, "gpus": [g for _, g in fixed]})
            return
        self.service_call(self.hardware_events.set_drain, node, index, action == "drain", caller.user)
        self.reply_model(models.Drain, {"node": node, "gpu": index, "drained": action == "drain"})
