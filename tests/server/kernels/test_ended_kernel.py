"""The stand-in for an ended GPU kernel (``kernels.ended``) answers every cell with who ended it, even when
the notebook's IOPub subscription joins after its shell request (it reconnects to the GPU kernel's ports).

The frontend's sockets are connected before the stand-in binds, as in the real restart: the shell request
waits in the client's queue and arrives as soon as the kernel binds, while the IOPub subscriber only
retries every 2 s. Published at once, the answer would be lost (ZeroMQ's slow joiner); the stand-in holds
it until a subscriber has joined.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import zmq
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.connect import write_connection_file
from jupyter_client.session import Session

pytestmark = pytest.mark.timeout(120)
ENDED = "hive-lab: this notebook's GPU kernel (job j-7) was cancelled by ivy (exam week)"


def test_a_cell_sent_before_iopub_reconnects_still_gets_its_answer(tmp_path):
    connection_file, info = write_connection_file(str(tmp_path / "kernel.json"), ip="127.0.0.1")
    session = Session(key=info["key"].encode(), signature_scheme=info["signature_scheme"])
    context = zmq.Context()
    iopub = context.socket(zmq.SUB)
    iopub.setsockopt(zmq.RECONNECT_IVL, 2000)  # the subscriber joins late
    iopub.setsockopt(zmq.SUBSCRIBE, b"")
    iopub.connect(f"tcp://127.0.0.1:{info['iopub_port']}")
    client = BlockingKernelClient(connection_file=connection_file)
    client.load_connection_file()
    client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
    msg_id = client.execute("print('second')")  # queued until the kernel binds its ports

    env = {**os.environ, "HIVE_KERNEL_ENDED": ENDED}
    kernel = subprocess.Popen([sys.executable, "-m", "hive_lab_server.kernels.ended", "-f", connection_file],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        reply = client.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and ENDED in reply["content"]["evalue"]
        seen: list[dict] = []
        while iopub.poll(60_000):  # bounds a hang only: the stream was published before the reply
            msg = session.deserialize(session.feed_identities(iopub.recv_multipart())[1])
            seen.append(msg)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                assert ENDED in msg["content"]["text"] and "second" not in msg["content"]["text"]
                break
            assert not (msg["parent_header"].get("msg_id") == msg_id
                        and msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"), \
                f"the cell's answer was published before anyone listened: {[m['msg_type'] for m in seen]}"
        else:
            raise AssertionError(f"no answer on IOPub: {[m['msg_type'] for m in seen]}")
    finally:
        client.stop_channels()
        kernel.kill()
        kernel.wait()
        iopub.close(linger=0)
        context.term()
