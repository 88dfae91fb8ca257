"""A student's attempt to become root through a job's environment (issue 22's first escape): a dir of
planted tools named like the ones a root helper might call (``setpriv``, ``mv``, ``sh``, ``python3``,
``unshare``, ``mount``, ``docker``, ``sbatch`` ...) first on ``PATH``, and an ``LD_PRELOAD`` library
(compiled here with ``cc``). Each planted tool and the library's constructor append a line with the
process's effective uid to a marker file; a root process that ran any of them leaves ``euid=0``.

The job's own processes (run as the student) load them too: that line proves the variables did reach
the job, so a test that finds no ``euid=0`` line could have found one.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

TOOLS = ("setpriv", "mv", "sh", "bash", "dash", "python", "python3", "unshare", "mount", "id", "env", "cat",
         "head", "sed", "printf", "chown", "chmod", "mkdir", "groupadd", "runuser", "su", "sudo", "docker",
         "sbatch", "srun", "scontrol", "scancel", "squeue", "nvidia-smi", "nvidia-cuda-mps-control", "kill")

PRELOAD_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void hive_planted(void) {
    char exe[256], line[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    int fd = open(MARKER, O_WRONLY | O_APPEND | O_CREAT, 0666);
    if (fd >= 0) {
        int len = snprintf(line, sizeof line, "preload euid=%d exe=%s\n", (int)geteuid(), exe);
        if (write(fd, line, len) < 0) {}
        close(fd);
    }
}
"""


class Planted:
    def __init__(self, root: pathlib.Path, marker: str | None = None):
        self.root = root
        self.marker = pathlib.Path(marker) if marker else root / "marker.log"
        self.bin = root / "bin"
        self.lib = root / "libplanted.so"

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "LD_PRELOAD": str(self.lib)}

    def lines(self) -> list[str]:
        return self.marker.read_text().splitlines() if self.marker.exists() else []

    def root_lines(self, lines: list[str] | None = None) -> list[str]:
        return [ln for ln in (self.lines() if lines is None else lines) if re.search(r"\beuid=0\b", ln)]

    def ran_as(self, uid: int, lines: list[str] | None = None) -> bool:
        return any(re.search(rf"\beuid={uid}\b", ln) for ln in (self.lines() if lines is None else lines))


def plant(root: pathlib.Path, marker: str | None = None) -> Planted:
    """Tools and library in ``root`` (which every account can traverse), readable and runnable by all.
    ``marker``: where the library writes (default ``root/marker.log``; a path inside a container, where
    the job's own command then prints it)."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler (cc) to build the LD_PRELOAD library")
    p = Planted(root, marker)
    root.mkdir(mode=0o755, exist_ok=True)
    os.chmod(root, 0o755)
    p.bin.mkdir(mode=0o755)
    if marker is None:
        p.marker.touch()
        os.chmod(p.marker, 0o666)
    src = root / "planted.c"
    src.write_text(PRELOAD_C)
    subprocess.run(["cc", "-shared", "-fPIC", f'-DMARKER="{p.marker}"', "-o", str(p.lib), str(src)], check=True)
    os.chmod(p.lib, 0o755)
    for name in TOOLS:
        real = next((f"{d}/{name}" for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin") if os.path.exists(f"{d}/{name}")), "")
        tool = p.bin / name
        tool.write_text(f'#!/bin/sh\necho "tool {name} euid=$(/usr/bin/id -u)" >> {p.marker}\n'
                        + (f'exec {real} "$@"\n' if real else "exit 0\n"))
        os.chmod(tool, 0o755)
    return p
