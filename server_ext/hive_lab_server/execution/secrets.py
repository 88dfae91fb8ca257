"""OpenPAI ``secrets``: kept encrypted in the job's env (``PAI_SECRET_<name>`` = ``hive-secret:<token>``)
and decrypted only into the task's environment at launch. The key is the service's own file (0600)."""

from __future__ import annotations

import os
import pathlib

from cryptography.fernet import Fernet, InvalidToken

PREFIX = "hive-secret:"


def _key(path: pathlib.Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = Fernet.generate_key()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key


def key_path(jobs_root: str | os.PathLike) -> pathlib.Path:
    return pathlib.Path(jobs_root) / ".secrets.key"


def seal(values: dict[str, str], jobs_root: str | os.PathLike) -> dict[str, str]:
    f = Fernet(_key(key_path(jobs_root)))
    return {k: PREFIX + f.encrypt(v.encode()).decode() for k, v in values.items()}


def unseal(env: dict[str, str], jobs_root: str | os.PathLike) -> dict[str, str]:
    """The env's sealed values in clear (those that no longer decrypt are left out)."""
    sealed = {k: v for k, v in env.items() if isinstance(v, str) and v.startswith(PREFIX)}
    if not sealed:
        return {}
    f = Fernet(_key(key_path(jobs_root)))
    out = {}
    for k, v in sealed.items():
        try:
            out[k] = f.decrypt(v[len(PREFIX):].encode()).decode()
        except InvalidToken:
            continue
    return out
