"""``hive-lab hub-config``: the jupyterhub_config.py fragment that runs hive-lab as one Hub service.

``hive-lab hub-config`` prints it (paste it into jupyterhub_config.py, or ``exec`` it from there);
``hive-lab hub-config --check jupyterhub_config.py`` loads a Hub config and says what is missing
(exit 1) or that it is complete (exit 0). See docs/jupyterhub.md.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

SERVICE = "hive-lab"
ADMIN_SCOPE = "custom:hive-lab:admin"
ACCESS_SCOPE = f"access:services!service={SERVICE}"
SERVICE_MODULE = "hive_lab_server.hub.service_app"
PREFIX = f"/services/{SERVICE}/"

TEMPLATE = '''\
# --- hive-lab: one GPU scheduler for every user, as a JupyterHub service -------------------------
# (printed by `hive-lab hub-config`; check a config with `hive-lab hub-config --check FILE`)
import sys

hive_lab_url = "http://{ip}:{port}"          # where the service listens (users' servers must reach it)

c.JupyterHub.services.append(
    {{
        "name": "{service}",
        "url": hive_lab_url,                   # the Hub proxies /services/{service}/ to it
        "command": [sys.executable, "-m", "{module}", "--config={config}"],
        "oauth_no_confirm": True,
        "oauth_client_allowed_scopes": ["{admin_scope}"],
        "display": True,
    }}
)

# instructors administer hive-lab (every VC, everyone's jobs, drains)
c.JupyterHub.custom_scopes.update({{
    "{admin_scope}": {{"description": "Administer hive-lab: every VC, everyone's jobs and logs, drains."}},
}})
c.JupyterHub.load_roles.extend([
    # every user may call the service (their Hub groups decide their VCs, see vc_access in {config})
    {{"name": "user", "scopes": ["self", "{access_scope}"]}},
    {{"name": "hive-lab-admin", "scopes": ["{admin_scope}", "{access_scope}"], "groups": {admin_groups!r}}},
])

# users' servers run hive-lab in client mode: no scheduler there; they forward to the service with
# their own API token, which therefore carries these scopes (each only where its owner holds it)
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!server",
    "{access_scope}",
    "{admin_scope}",
]
c.Spawner.environment.update({{
    "HIVE_LAB_MODE": "client",
    "HIVE_LAB_SERVICE_URL": hive_lab_url + "{prefix}",
}})
# --- end of hive-lab -------------------------------------------------------------------------------
'''

SERVICE_CONFIG = '''\
# {config}: the hive-lab service's own settings (c.HiveLabApp, see `hive-lab hub-config`)
# one node of 4 GPUs in pairs (levels: a 2-GPU task gets two GPUs on one switch); one VC per course, 2 GPUs each.
# Or a HiveD / short-form YAML file, e.g. "/etc/hive-lab/cluster.yaml" (docs/teaching.md)
c.HiveLabApp.cluster_config = {{"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "levels": ["pair"],
                               "vcs": {{"cv-101": 2, "nlp-201": 2}}}}
c.HiveLabApp.launcher = "local"                # local | docker | slurm
c.HiveLabApp.db_url = "sqlite:////var/lib/hive-lab/hive_lab.sqlite"
c.HiveLabApp.jobs_root = "/var/lib/hive-lab/jobs"
c.HiveLabApp.vc_access = {{"@cv-101": ["cv-101"], "@nlp-201": ["nlp-201"]}}   # Hub groups -> VCs
# per-student limits inside a VC (an admin may change them at run time: hive-lab admin limits VC --set ...)
# c.HiveLabApp.user_limits = {{"cv-101": {{"default": {{"max_gpus": 2, "max_kernels": 1, "max_priority": 10}}}}}}
'''


def fragment(ip: str = "127.0.0.1", port: int = 10101, config: str = "/etc/hive-lab/hive_lab_config.py",
             admin_groups: list[str] | None = None) -> str:
    return TEMPLATE.format(ip=ip, port=port, config=config, service=SERVICE, module=SERVICE_MODULE,
                           admin_scope=ADMIN_SCOPE, access_scope=ACCESS_SCOPE, prefix=PREFIX,
                           admin_groups=list(admin_groups if admin_groups is not None else ["instructors"]))


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "hub-config", help="print (or --check) the jupyterhub_config.py fragment running hive-lab as a Hub service"
    )
    p.add_argument("--check", metavar="FILE", help="check a jupyterhub_config.py instead of printing the fragment")
    p.add_argument("--ip", default="127.0.0.1", help="address the service listens on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=10101, help="port the service listens on (default 10101)")
    p.add_argument("--config", default="/etc/hive-lab/hive_lab_config.py",
                   help="the service's own settings file (c.HiveLabApp: cluster, VCs, vc_access, store)")
    p.add_argument("--admin-group", action="append", dest="admin_groups", metavar="GROUP",
                   help="Hub group whose members administer hive-lab (repeatable; default: instructors)")
    p.add_argument("--service-config", action="store_true",
                   help="print an example of the service's own settings file instead")
    p.add_argument("--check-service", metavar="FILE",
                   help="check the service's own settings file (its cluster has every VC vc_access names)")
    p.add_argument("--append", metavar="FILE",
                   help="append the fragment to FILE (a jupyterhub_config.py) instead of printing it; FILE and its "
                        "missing dirs are created, FILE is made 0600 (a Hub config may hold secrets)")
    p.add_argument("--out", metavar="FILE",
                   help="with --service-config: write the example to FILE (0600, missing dirs created)")
    p.set_defaults(func=run)


def write_private(path: str | os.PathLike, text: str, *, append: bool) -> pathlib.Path:
    """Write (or append) ``text`` to ``path``, owner-only (0600) from its creation on; missing parent dirs
    are created (0755). An existing file is narrowed to 0600 first."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", closefd=False) as f:
            if append and os.fstat(fd).st_size:
                f.write("\n")
            f.write(text)
    finally:
        os.close(fd)
    return path


def load_checked(path: str | os.PathLike):
    """(config, None), or (None, what is wrong) when the file is missing or does not load."""
    if not pathlib.Path(path).is_file():
        return None, f"{path} does not exist"
    try:
        return load(path), None
    except Exception as exc:  # the admin's file: report, do not crash
        return None, f"cannot load {path}: {type(exc).__name__}: {exc}"


def check_service(path: str | os.PathLike) -> list[str]:
    """What is inconsistent in the service's own settings file (empty: nothing)."""
    from hive_lab_server.auth.access import unknown_vcs
    from hive_lab_server.cluster import resolve_cluster
    from hive_scheduler.errors import ConfigError

    cfg, problem = load_checked(path)
    if problem:
        return [problem]
    app = cfg.HiveLabApp
    try:
        cluster = resolve_cluster(config_value(app, "cluster_config", "default"), "none")
    except (ConfigError, OSError, ValueError) as exc:
        return [f"cluster_config is not valid: {exc}"]
    problems = unknown_vcs(config_value(app, "vc_access", {}), cluster.config.virtual_clusters)
    mode = pathlib.Path(path).stat().st_mode & 0o777
    if mode & 0o077:
        problems.append(f"{path} is readable or writable by others (mode {mode:04o}): chmod 600 {path}")
    return problems


def run(args) -> int:
    if args.check_service:
        problems = check_service(args.check_service)
        for line in problems:
            print(f"- {line}", file=sys.stderr)
        if problems:
            print(f"{args.check_service}: {len(problems)} problem(s)", file=sys.stderr)
            return 1
        print(f"{args.check_service}: the service's settings agree with its cluster")
        return 0
    if args.check:
        problems = check(args.check)
        for line in problems:
            print(f"- {line}", file=sys.stderr)
        if problems:
            print(f"{args.check}: {len(problems)} problem(s); `hive-lab hub-config` prints a working fragment",
                  file=sys.stderr)
            return 1
        print(f"{args.check}: hive-lab service configured")
        return 0
    if args.service_config:
        text = SERVICE_CONFIG.format(config=args.config)
        if args.out:
            print(f"wrote {write_private(args.out, text, append=False)} (0600)")
        else:
            print(text, end="")
        return 0
    text = fragment(args.ip, args.port, args.config, args.admin_groups)
    if args.append:
        print(f"appended the hive-lab service to {write_private(args.append, text, append=True)} (0600)")
    else:
        print(text, end="")
    return 0


# --- checking ----------------------------------------------------------------------------------------


def config_value(section: Any, name: str, default: Any) -> Any:
    """A config value, with lazy ``.update()``/``.append()`` values resolved against ``default``."""
    if name not in section:
        return default
    value = section[name]
    get_value = getattr(value, "get_value", None)
    return get_value(default) if callable(get_value) else value


def load(path: str | os.PathLike):
    """Load a jupyterhub_config.py as JupyterHub does (a traitlets Python config file)."""
    from traitlets.config.loader import PyFileConfigLoader

    path = pathlib.Path(path).resolve()
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def _lets_anyone_in(cfg) -> bool:
    """Some authenticator setting lets users in (JupyterHub >= 5 allows nobody by default)."""
    for name in cfg:
        if name.endswith("Authenticator"):
            section = cfg[name]
            if section.get("allow_all") or section.get("allowed_users") or section.get("allowed_groups"):
                return True
    return False


def check(path: str | os.PathLike) -> list[str]:
    """What is missing for hive-lab to run as one Hub service (empty: nothing)."""
    cfg, problem = load_checked(path)
    if problem:
        return [problem]
    problems: list[str] = []
    mode = pathlib.Path(path).stat().st_mode & 0o777
    if mode & 0o077:
        problems.append(f"{path} is readable or writable by others (mode {mode:04o}); a Hub config may hold "
                        f"secrets: chmod 600 {path}")
    hub, spawner = cfg.JupyterHub, cfg.Spawner
    if not _lets_anyone_in(cfg):
        problems.append("no c.Authenticator.allowed_users, allowed_groups or allow_all: on JupyterHub >= 5 nobody "
                        "can log in; list the students (c.Authenticator.allowed_users = {...}, as `hive-lab course "
                        "init` writes) or set c.Authenticator.allow_all = True")
    services = [s for s in config_value(hub, "services", []) if isinstance(s, dict) and s.get("name") == SERVICE]
    if not services:
        problems.append(f'c.JupyterHub.services has no service named "{SERVICE}"')
        service = {}
    else:
        service = services[0]
        if not service.get("url"):
            problems.append(f'service "{SERVICE}" has no "url" (where it listens, e.g. http://127.0.0.1:10101)')
        command = [str(a) for a in service.get("command") or []]
        if not command:
            problems.append(f'service "{SERVICE}" has no "command": the Hub would not start it '
                            f'(use [sys.executable, "-m", "{SERVICE_MODULE}", ...])')
        elif SERVICE_MODULE not in command and not any(a.endswith("hive-lab-service") for a in command):
            problems.append(f'service "{SERVICE}" does not run {SERVICE_MODULE} (its command: {command})')
        if not service.get("oauth_no_confirm"):
            problems.append(f'service "{SERVICE}": set "oauth_no_confirm": True (users are not asked to confirm '
                            "that hive-lab may identify them)")
    scopes = config_value(hub, "custom_scopes", {})
    if ADMIN_SCOPE not in scopes:
        problems.append(f'c.JupyterHub.custom_scopes does not declare "{ADMIN_SCOPE}" (instructors\' admin scope)')
    roles = config_value(hub, "load_roles", [])
    granted = [r for r in roles if isinstance(r, dict) and any(
        s in (ACCESS_SCOPE, "access:services") for s in r.get("scopes", ()))]
    if not granted and ACCESS_SCOPE not in set(config_value(hub, "extra_user_scopes", set())):
        problems.append(f'no role in c.JupyterHub.load_roles grants "{ACCESS_SCOPE}": users could not call the '
                        'service (add it to the "user" role)')
    if not any(ADMIN_SCOPE in r.get("scopes", ()) for r in roles if isinstance(r, dict)):
        problems.append(f'no role in c.JupyterHub.load_roles grants "{ADMIN_SCOPE}": nobody administers hive-lab')
    token_scopes = config_value(spawner, "server_token_scopes", None)
    if callable(token_scopes):
        pass  # computed per spawner: cannot be checked here
    elif not token_scopes or ACCESS_SCOPE not in token_scopes:
        problems.append(f'c.Spawner.server_token_scopes lacks "{ACCESS_SCOPE}": users\' servers could not forward '
                        "to the service")
    env = config_value(spawner, "environment", {})
    service_url = env.get("HIVE_LAB_SERVICE_URL") if isinstance(env, dict) else None
    if not service_url:
        problems.append("c.Spawner.environment lacks HIVE_LAB_SERVICE_URL: users' servers would each start their "
                        f"own scheduler (set it to the service's url + {PREFIX})")
    elif service.get("url") and not str(service_url).rstrip("/").endswith(PREFIX.rstrip("/")):
        problems.append(f"HIVE_LAB_SERVICE_URL ({service_url}) does not end with the service's prefix {PREFIX}")
    if isinstance(env, dict) and env.get("HIVE_LAB_MODE", "client") != "client":
        problems.append(f"c.Spawner.environment sets HIVE_LAB_MODE={env['HIVE_LAB_MODE']}; users' servers must be "
                        "in client mode")
    return problems
