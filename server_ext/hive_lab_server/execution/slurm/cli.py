"""Talking to Slurm through its command-line tools (``sbatch --parsable``, ``scancel``, ``squeue --json``,
``sinfo --json``, ``scontrol``), asynchronously.

Every call runs the tool as a subprocess with ``SLURM_CONF`` pointed at the configured file (when one
is given) and raises ``SlurmError`` with the tool's own error text when it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from typing import Any


class SlurmError(RuntimeError):
    """A Slurm command or REST call failed; the message carries Slurm's own words."""


class SlurmCLI:
    def __init__(self, slurm_conf: str | None = None, bin_dir: str | None = None, timeout_s: float = 30.0):
        self.slurm_conf = slurm_conf or os.environ.get("SLURM_CONF") or None
        self.bin_dir = bin_dir
        self.timeout_s = timeout_s

    # --- plumbing ------------------------------------------------------------------------------

    def env(self, minimal: bool = False) -> dict[str, str]:
        """The tools' environment. ``minimal``: only what sbatch needs, because a batch job inherits
        sbatch's environment (``--export=ALL``; ``--export=NONE`` makes slurmd load the user's login
        environment, which costs about 2 s per job), and the server's secrets must not reach jobs."""
        if minimal:
            env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ")
                   if k in os.environ}
            if self.slurm_conf:
                env["SLURM_CONF"] = self.slurm_conf
            return env
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        for key in ("SLURM_JOB_ID", "SLURM_JOBID"):  # never act as if inside a job
            env.pop(key, None)
        return env

    def tool(self, name: str) -> str:
        if self.slurm_conf and not os.path.exists(self.slurm_conf):
            raise SlurmError(f"Slurm config {self.slurm_conf} does not exist (SlurmLauncher.slurm_conf / SLURM_CONF)")
        path = os.path.join(self.bin_dir, name) if self.bin_dir else shutil.which(name)
        if not path or not os.path.exists(path):
            raise SlurmError(f"{name} not found{' in ' + self.bin_dir if self.bin_dir else ' on PATH'}; "
                             "install Slurm's client tools (Debian: slurm-client) or set SlurmLauncher.bin_dir")
        return path

    async def run(self, name: str, *args: str, stdin: str | None = None, minimal_env: bool = False) -> str:
        proc = await asyncio.create_subprocess_exec(
            self.tool(name), *args, env=self.env(minimal_env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None),
                                              self.timeout_s)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise SlurmError(f"{name} {' '.join(args)}: no answer within {self.timeout_s:.0f}s") from None
        if proc.returncode != 0:
            text = (err or out).decode(errors="replace").strip()
            raise SlurmError(f"{name}: {text or f'exit code {proc.returncode}'}")
        return out.decode(errors="replace")

    def run_sync(self, name: str, *args: str) -> str:
        try:
            proc = subprocess.run([self.tool(name), *args], env=self.env(), capture_output=True, text=True,
                                  timeout=self.timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{name} {' '.join(args)}: no answer within {self.timeout_s:.0f}s") from None
        if proc.returncode != 0:
            raise SlurmError(f"{name}: {(proc.stderr or proc.stdout).strip() or f'exit code {proc.returncode}'}")
        return proc.stdout

    # --- jobs ----------------------------------------------------------------------------------

    async def submit(self, script: str, args: tuple[str, ...] = ()) -> int:
        """``sbatch --parsable`` the script (its ``#SBATCH`` lines carry the options); the job id."""
        out = await self.run("sbatch", "--parsable", *args, stdin=script, minimal_env=True)
        first = out.strip().split(";")[0]  # "<id>[;cluster]"
        try:
            return int(first)
        except ValueError:
            raise SlurmError(f"sbatch answered {out.strip()!r}, not a job id") from None

    async def cancel(self, job_id: int, signal: str | None = None) -> None:
        args = [str(job_id)]
        if signal:
            args = ["--signal", signal, "--full", *args]
        await self.run("scancel", *args)

    async def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld still knows (pending, running and recently ended), ``squeue --json``."""
        return json.loads(await self.run("squeue", "--json")).get("jobs", [])

    # --- nodes ---------------------------------------------------------------------------------

    async def nodes(self) -> list[dict[str, Any]]:
        return json.loads(await self.run("sinfo", "--json")).get("nodes", [])

    def nodes_sync(self) -> list[dict[str, Any]]:
        return json.loads(self.run_sync("sinfo", "--json")).get("nodes", [])

    def topology_sync(self) -> str:
        """``scontrol show topology`` (empty when no topology plugin is configured)."""
        try:
            return self.run_sync("scontrol", "show", "topology")
        except SlurmError as exc:
            if "not configured" in str(exc).lower() or "no topology" in str(exc).lower():
                return ""
            raise

    async def token(self, user: str, lifespan_s: int = 3600) -> str:
        """A JWT for ``user`` (``scontrol token``; needs root or SlurmUser)."""
        out = await self.run("scontrol", "token", f"username={user}", f"lifespan={int(lifespan_s)}")
        for part in out.split():
            if part.startswith("SLURM_JWT="):
                return part.split("=", 1)[1]
        raise SlurmError(f"scontrol token answered {out.strip()!r}")
