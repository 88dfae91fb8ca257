"""The stand-in for a GPU kernel whose job someone else ended (an instructor's cancel, a time limit).

jupyter_server's restarter sees such a kernel die and restarts it at once; a new GPU job would come back
a second after the instructor cancelled it. Instead the provisioner starts this small kernel in its
place, on the Jupyter server's machine and without GPUs: every cell it is asked to run answers, as an
error, who ended the kernel and why (``HIVE_KERNEL_ENDED``) and how to start again (Kernel > Restart,
which asks for GPUs anew). Run as ``python -m hive_lab_server.kernels.ended -f CONNECTION_FILE``.

It takes over the GPU kernel's ports, so the notebook's open connection reconnects to it by itself: its
shell request can arrive before its IOPub subscription has (ZeroMQ's slow joiner), and an answer
published then would be lost. So a cell is answered only once a subscriber has joined (IOPub is an
XPUB socket: it sees each subscription).
"""

from __future__ import annotations

import asyncio
import os
import threading

from ipykernel import kernelapp
from ipykernel.iostream import IOPubThread
from ipykernel.kernelbase import Kernel

SUBSCRIBER_WAIT_S = 10.0

DEFAULT = "hive-lab: this GPU kernel was ended. Restart the kernel (Kernel > Restart Kernel) to ask for GPUs again."


def message() -> str:
    return os.environ.get("HIVE_KERNEL_ENDED") or DEFAULT


class SubscriberWatchingIOPub(IOPubThread):
    """IOPub that notes when a client has subscribed (``subscribed``), so replies are not sent into the void."""

    subscribed = threading.Event()

    def _handle_subscription(self, frames):
        if any(frame[:1] == b"\x01" for frame in frames):
            SubscriberWatchingIOPub.subscribed.set()
        super()._handle_subscription(frames)


class EndedKernel(Kernel):
    implementation = "hive-lab-ended"
    implementation_version = "1"
    language_info = {"name": "python", "mimetype": "text/x-python", "file_extension": ".py"}

    @property
    def banner(self) -> str:
        return message()

    async def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False,
                         **kwargs):
        text = message()
        deadline = asyncio.get_running_loop().time() + SUBSCRIBER_WAIT_S
        while not SubscriberWatchingIOPub.subscribed.is_set() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": "stderr", "text": text + "\n"})
        return {"status": "error", "execution_count": self.execution_count, "ename": "KernelEnded",
                "evalue": text, "traceback": [text]}


def main() -> None:
    kernelapp.IOPubThread = SubscriberWatchingIOPub  # this process only: its app builds IOPub with it
    kernelapp.IPKernelApp.launch_instance(kernel_class=EndedKernel)


if __name__ == "__main__":
    main()
