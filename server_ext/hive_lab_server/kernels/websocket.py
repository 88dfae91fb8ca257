"""The kernel websocket of a hive kernel that still waits for its GPUs.

jupyter_server holds a kernel's websocket *before* upgrading it until the kernel answers a
``kernel_info`` request (up to ``kernel_info_timeout``). A kernel queued for GPUs cannot answer, so the
browser gives up and closes; jupyter_server then fails the upgrade with a 500
(``'NoneType' object has no attribute 'kernel_ws_protocol'``). For a queued hive kernel this
connection upgrades at once instead: the frontend's first messages wait in the kernel's ZMQ sockets
(its ports are chosen before it runs) and are answered when it starts; meanwhile the hive-lab Lab
extension tells the notebook why it waits.
"""

from __future__ import annotations

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class HiveKernelWebsocketConnection(ZMQChannelsWebsocketConnection):
    async def prepare(self):
        provisioner = getattr(self.kernel_manager, "provisioner", None)
        if not getattr(provisioner, "waiting_for_gpus", False):
            return await super().prepare()
        await self._register_session()
        self.session.key = self.kernel_manager.session.key
        self.log.info("hive kernel %s waits for GPUs: its websocket opens now, the kernel answers once it runs",
                      self.kernel_id)
        return None


def install(web_app_settings: dict) -> bool:
    """Use this connection class unless the server was configured with another one (a gateway's)."""
    current = web_app_settings.get("kernel_websocket_connection_class")
    if current is None or current is ZMQChannelsWebsocketConnection:
        web_app_settings["kernel_websocket_connection_class"] = HiveKernelWebsocketConnection
        return True
    return False
