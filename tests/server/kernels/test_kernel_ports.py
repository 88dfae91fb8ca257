"""A hive kernel's ports are drawn below the OS's ephemeral range (``kernels.ports``): bound only once its job
runs, maybe minutes after Jupyter chose them, they must not be ports the OS hands to outgoing connections
meanwhile (a kernel dying at its bind was a CI failure: "Kernel died before replying to kernel_info")."""

from __future__ import annotations

import random
import socket

from jupyter_client.connect import LocalPortCache

from hive_lab_server.kernels import ports


def test_five_free_ports_below_the_range_each_handed_out_once():
    cache = LocalPortCache.instance().currently_used_ports
    first = ports.below_ephemeral("127.0.0.1", 5, low=32768, rng=random.Random(1))
    second = ports.below_ephemeral("127.0.0.1", 5, low=32768, rng=random.Random(1))  # (the same draws)
    try:
        for chosen in (first, second):
            assert chosen is not None and len(set(chosen)) == 5
            assert all(ports.LOWEST <= p < 32768 for p in chosen)
            assert set(chosen) <= cache  # Jupyter's cache has them: the kernel's cleanup gives them back
        assert not set(first) & set(second)
    finally:
        for p in (first or []) + (second or []):
            LocalPortCache.instance().return_port(p)


def test_a_port_in_use_is_not_chosen():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        taken.listen()

        class Draws(random.Random):
            def __init__(self):
                super().__init__(7)
                self.first = True

            def randrange(self, *args):
                if self.first:
                    self.first = False
                    return port
                return super().randrange(*args)
        chosen = ports.below_ephemeral("127.0.0.1", 5, low=max(port + 1, 32768), rng=Draws())
    try:
        assert chosen is not None and port not in chosen
    finally:
        for p in chosen or []:
            LocalPortCache.instance().return_port(p)


def test_without_a_range_to_read_or_room_below_it_jupyter_chooses(tmp_path):
    assert ports.ephemeral_low(str(tmp_path / "none")) is None
    (tmp_path / "range").write_text("32768\t60999\n")
    assert ports.ephemeral_low(str(tmp_path / "range")) == 32768
    assert ports.below_ephemeral("127.0.0.1", 5, low=ports.LOWEST + 10) is None
