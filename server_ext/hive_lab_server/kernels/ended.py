"""The stand-in for a GPU kernel whose job someone else ended (an instructor's cancel, a time limit).

jupyter_server's restarter sees such a kernel die and restarts it at once; a new GPU job would come back
a second after the instructor cancelled it. Instead the provisioner starts this small kernel in its
place, on the Jupyter server's machine and without GPUs: every cell it is asked to run answers, as an
error, who ended the kernel and why (``HIVE_KERNEL_ENDED``) and how to start again (Kernel > Restart,
which asks for GPUs anew). Run as ``python -m hive_lab_server.kernels.ended -f CONNECTION_FILE``.
"""

from __future__ import annotations

import os

from ipykernel.kernelbase import Kernel

DEFAULT = "hive-lab: this GPU kernel was ended. Restart the kernel (Kernel > Restart Kernel) to ask for GPUs again."


def message() -> str:
    return os.environ.get("HIVE_KERNEL_ENDED") or DEFAULT


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
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": "stderr", "text": text + "\n"})
        return {"status": "error", "execution_count": self.execution_count, "ename": "KernelEnded",
                "evalue": text, "traceback": [text]}


def main() -> None:
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=EndedKernel)


if __name__ == "__main__":
    main()
