"""Talking to Slurm through ``slurmrestd`` (OpenAPI v0.0.38, Slurm 22.05) with JWT authentication.

Every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``: jobs are submitted *as the
hive-lab user who owns the job* (Slurm runs them under that Unix account), everything else as the
service user. Tokens are minted with the cluster's JWT key (``jwt_key_file``, HS256, the
``AuthAltParameters=jwt_key=`` file) or, without it, with ``scontrol token username=<user>`` (needs
root or SlurmUser); they are cached until shortly before they expire.

``url``: ``unix:///path/to/slurmrestd.sock`` or ``http://host:6820``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from hive_lab_server.execution.slurm.cli import SlurmCLI, SlurmError

API = "/slurm/v0.0.38"


class SlurmREST:
    def __init__(self, url: str, *, cli: SlurmCLI | None = None, jwt_key_file: str | None = None,
                 lifespan_s: int = 3600, service_user: str = "root", timeout_s: float = 30.0):
        if url.startswith("unix://"):
            transport = httpx.AsyncHTTPTransport(uds=url[len("unix://"):])
            base = "http://slurmrestd"
        elif url.startswith(("http://", "https://")):
            transport, base = None, url.rstrip("/")
        else:
            raise ValueError(f"SlurmLauncher.rest_url: unix:///path.sock or http(s)://host:port, got {url!r}")
        self.client = httpx.AsyncClient(base_url=base, transport=transport, timeout=timeout_s)
        self.cli = cli or SlurmCLI()
        self.jwt_key_file = jwt_key_file
        self.lifespan_s = lifespan_s
        self.service_user = service_user
        self._tokens: dict[str, tuple[str, float]] = {}

    async def token(self, user: str) -> str:
        cached = self._tokens.get(user)
        if cached and cached[1] > time.time() + 60:
            return cached[0]
        if self.jwt_key_file:
            import jwt

            with open(self.jwt_key_file, "rb") as f:
                key = f.read()
            now = int(time.time())
            tok = jwt.encode({"iat": now, "exp": now + self.lifespan_s, "sun": user}, key, algorithm="HS256")
        else:
            tok = await self.cli.token(user, self.lifespan_s)
        self._tokens[user] = (tok, time.time() + self.lifespan_s)
        return tok

    async def request(self, method: str, path: str, user: str | None = None, **kwargs: Any) -> dict[str, Any]:
        user = user or self.service_user
        headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": await self.token(user)}
        try:
            r = await self.client.request(method, API + path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise SlurmError(f"slurmrestd {method} {path}: {exc}") from None
        try:
            body = r.json()
        except ValueError:
            body = {}
        errors = [e for e in body.get("errors") or [] if e.get("error_number") or e.get("error")]
        if r.status_code >= 400 or errors:
            words = "; ".join(str(e.get("error") or e.get("description") or e) for e in errors) or r.text[:300]
            raise SlurmError(f"slurmrestd {method} {path} ({r.status_code}): {words}")
        return body

    async def ping(self) -> dict[str, Any]:
        return await self.request("GET", "/ping")

    async def submit(self, plan: Any, user: str | None = None, all_nodes: list[str] | tuple[str, ...] = ()) -> int:
        """Submit a ``SlurmJobPlan`` as ``user``; the Slurm job id. ``all_nodes``: every node the job
        could land on (pinning over REST excludes the others)."""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        body = await self.request("POST", "/job/submit", user=user, json=plan.rest_payload(env, all_nodes))
        job_id = body.get("job_id")
        if not isinstance(job_id, int):
            raise SlurmError(f"slurmrestd accepted the job but returned no job id: {body}")
        return job_id

    async def cancel(self, job_id: int, signal: str | None = None, user: str | None = None) -> None:
        params = {"signal": signal} if signal else None
        await self.request("DELETE", f"/job/{job_id}", user=user, params=params)

    async def jobs(self) -> list[dict[str, Any]]:
        return (await self.request("GET", "/jobs")).get("jobs", [])

    async def nodes(self) -> list[dict[str, Any]]:
        return (await self.request("GET", "/nodes")).get("nodes", [])

    async def close(self) -> None:
        await self.client.aclose()
