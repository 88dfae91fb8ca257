"""Every setting of hive-lab, documented once: generated from the traitlets' own help into
``docs/configuration.md`` (``python -m hive_lab_server.config_docs > docs/configuration.md``; a test
fails when the page and the code drift). ``jupyter lab --help-all`` shows the same text."""

from __future__ import annotations

import importlib
import inspect
import textwrap

# (section title, "module:Class") in the order a reader meets them
CONFIGURABLES = (
    ("The service", "hive_lab_server.app:HiveLabApp"),
    ("Isolation: jobs under their owners' identities", "hive_lab_server.execution.isolation.config:Isolation"),
    ("Launchers (all)", "hive_lab_server.execution.launchers.base:Launcher"),
    ("The local launcher", "hive_lab_server.execution.launchers.local:LocalLauncher"),
    ("The Docker launcher", "hive_lab_server.execution.launchers.docker:DockerLauncher"),
    ("The Slurm launcher", "hive_lab_server.execution.launchers.slurm:SlurmLauncher"),
    ("GPU kernels (the kernel provisioner)", "hive_lab_server.kernels.provisioner:HiveProvisioner"),
    ("A token per person (shared machine without a Hub)", "hive_lab_server.auth.identity:TokenMapIdentityProvider"),
    ("Who may use the jupyter_server APIs (token-map mode)", "hive_lab_server.execution.isolation.authorizer:HiveLabAuthorizer"),
    ("Under JupyterHub", "hive_lab_server.hub.identity:HubIdentityProvider"),
)


def _cls(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _one_line(text: str) -> str:
    return " ".join(inspect.cleandoc(text or "").split()).replace("|", "\\|")


def _default(trait) -> str:
    try:
        value = trait.default_value_repr()
    except Exception:  # noqa: BLE001 - a dynamic default: say so
        value = "(computed)"
    if "Undefined" in value:
        value = "(computed, see the text)"
    return value.replace("|", "\\|")


def markdown() -> str:
    out = [textwrap.dedent("""\
        # Configuration reference

        Generated from the code (`python -m hive_lab_server.config_docs > docs/configuration.md`); do not
        edit by hand. Set any of these in `jupyter_server_config.py` (`c.HiveLabApp.launcher = "docker"`)
        or on the command line (`--HiveLabApp.launcher=docker`); `jupyter lab --help-all` lists them too.
        """)]
    for title, path in CONFIGURABLES:
        cls = _cls(path)
        traits = cls.class_own_traits(config=True)
        if not traits:
            continue
        out.append(f"\n## {title}: `c.{cls.__name__}`\n")
        doc = _one_line((cls.__doc__ or "").split("\n\n")[0])
        if doc:
            out.append(f"{doc}\n")
        out.append("\n| setting | type | default | what |\n| --- | --- | --- | --- |")
        for name, trait in sorted(traits.items()):
            out.append(f"| `{name}` | {type(trait).__name__} | `{_default(trait)}` | {_one_line(trait.help)} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
