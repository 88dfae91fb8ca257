"""Find the hive-lab server a client should talk to.

Order (first that applies wins):

1. explicit ``url``/``token`` arguments (CLI ``--url/--token``);
2. ``HIVE_LAB_URL`` + ``HIVE_LAB_TOKEN`` (hive-lab's kernel provisioner injects these into kernels);
3. the JupyterHub single-user environment (``JUPYTERHUB_SERVICE_URL`` or ``JUPYTERHUB_API_URL``'s
   host + ``JUPYTERHUB_SERVICE_PREFIX``, token ``JUPYTERHUB_API_TOKEN``);
4. the runtime file (``jpserver-*.json`` in ``jupyter_runtime_dir()``) of the Jupyter server that
   started this kernel (matched by parent process), else the only or most recently started server.

A URL may be the server's base URL (``http://host:8888/user/ann/``) or the API URL
(``.../hive_lab/api/``); both are normalised to the base URL.
"""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from hive_lab_server.wire import transport

from .errors import ServerNotFound

API_PATH = transport.API_PREFIX

HOW_TO_CONFIGURE = (
    "Set HIVE_LAB_URL (the Jupyter server's URL, e.g. http://127.0.0.1:8888/) and HIVE_LAB_TOKEN "
    "(its token), or pass url=/token= (CLI: --url/--token), or start JupyterLab with hive-lab "
    "installed on this machine (`jupyter lab`) so its runtime file can be found."
)


@dataclass(frozen=True)
class ServerInfo:
    """Where the server is: ``base_url`` always ends with ``/``; ``source`` says how it was found."""

    base_url: str
    token: str | None
    source: str

    @property
    def api_url(self) -> str:
        return transport.api_url(self.base_url)


def normalise_base_url(url: str) -> str:
    """``http://h:1/x/hive_lab/api/jobs`` -> ``http://h:1/x/``; adds a trailing slash; keeps the base path."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    path = parts.path or "/"
    marker = "/" + API_PATH.rstrip("/")
    idx = path.find(marker)
    if idx >= 0:
        path = path[: idx + 1]
    if not path.endswith("/"):
        path += "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def from_environment(env: dict[str, str] | None = None) -> ServerInfo | None:
    env = os.environ if env is None else env
    url = env.get("HIVE_LAB_URL")
    if url:
        return ServerInfo(normalise_base_url(url), env.get("HIVE_LAB_TOKEN") or None, "HIVE_LAB_URL")
    return None


def from_jupyterhub(env: dict[str, str] | None = None) -> ServerInfo | None:
    env = os.environ if env is None else env
    token = env.get("JUPYTERHUB_API_TOKEN") or env.get("JPY_API_TOKEN")
    service_url = env.get("JUPYTERHUB_SERVICE_URL")
    prefix = env.get("JUPYTERHUB_SERVICE_PREFIX")
    if service_url:
        base = urlsplit(service_url)
        path = prefix or base.path or "/"
        url = urlunsplit((base.scheme, base.netloc, path, "", ""))
        return ServerInfo(normalise_base_url(url), token, "JupyterHub (JUPYTERHUB_SERVICE_URL)")
    if prefix and env.get("JUPYTERHUB_API_URL"):
        hub = urlsplit(env["JUPYTERHUB_API_URL"])
        host = env.get("JUPYTERHUB_HOST") or f"{hub.scheme}://{hub.netloc}"
        return ServerInfo(normalise_base_url(host.rstrip("/") + prefix), token, "JupyterHub (JUPYTERHUB_API_URL)")
    return None


def _ancestor_pids(pid: int, depth: int = 8) -> list[int]:
    """Parent, grandparent, ... of ``pid`` read from /proc (empty where /proc is not there)."""
    chain: list[int] = []
    for _ in range(depth):
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        # the command name may contain spaces and parentheses: the ppid follows the last ')'
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid <= 1:
            break
        chain.append(ppid)
        pid = ppid
    if not chain:
        chain = [os.getppid()]
    return chain


def _running_servers(runtime_dir: str | None) -> list[tuple[dict, float]]:
    from jupyter_core.paths import jupyter_runtime_dir

    directory = pathlib.Path(runtime_dir or jupyter_runtime_dir())
    found = []
    for path in directory.glob("jpserver-*.json"):
        try:
            info = json.loads(path.read_text())
            pid = int(info.get("pid", 0))
        except (OSError, ValueError):
            continue
        if pid and _pid_alive(pid):
            found.append((info, path.stat().st_mtime))
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def from_runtime_files(runtime_dir: str | None = None) -> ServerInfo | None:
    servers = _running_servers(runtime_dir)
    if not servers:
        return None
    ancestors = _ancestor_pids(os.getpid())
    by_pid = {int(info["pid"]): info for info, _ in servers}
    for pid in ancestors:
        if pid in by_pid:
            return _info_from_runtime(by_pid[pid], "the Jupyter server that started this kernel")
    info, _ = max(servers, key=lambda s: s[1])
    source = "the only running Jupyter server" if len(servers) == 1 else "the most recent Jupyter server"
    return _info_from_runtime(info, source)


def _info_from_runtime(info: dict, source: str) -> ServerInfo:
    url = info.get("url") or f"http://{info.get('hostname', '127.0.0.1')}:{info['port']}{info.get('base_url', '/')}"
    # a server listening on all interfaces records a URL that may not be reachable; prefer loopback
    parts = urlsplit(url)
    if parts.hostname in ("0.0.0.0", "::", ""):
        netloc = f"127.0.0.1:{parts.port or info.get('port')}"
        url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return ServerInfo(normalise_base_url(url), info.get("token") or None, f"{source} (pid {info.get('pid')})")


def find_server(url: str | None = None, token: str | None = None, runtime_dir: str | None = None) -> ServerInfo:
    """Resolve the server in the documented order; raise ``ServerNotFound`` saying what to set."""
    if url:
        return ServerInfo(normalise_base_url(url), token or os.environ.get("HIVE_LAB_TOKEN") or None, "arguments")
    for finder in (from_environment, from_jupyterhub):
        found = finder()
        if found:
            return ServerInfo(found.base_url, token or found.token, found.source)
    found = from_runtime_files(runtime_dir)
    if found:
        return ServerInfo(found.base_url, token or found.token, found.source)
    raise ServerNotFound("No hive-lab server found. " + HOW_TO_CONFIGURE)
