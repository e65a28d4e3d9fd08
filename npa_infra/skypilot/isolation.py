"""Per-stack SkyPilot state directories (skypilot-0.12.md §6, §7.2).

A directory ``D`` holds everything SkyPilot writes for one stack: ``D/home``
(HOME, with the caller's first kubeconfig linked in), ``D/sky-runtime``
(SKY_RUNTIME_DIR), a generated global config ``D/config.yaml`` that allows
exactly one Kubernetes context, and ``D/user-id``: the stable controller
identity generated once for this directory. An explicit ``SKYPILOT_USER_ID``
in the caller's environment takes precedence.

A directory whose config a stack's controller resource wrote (``npa stack
up``) carries ``D/stack-owner`` with the stack's name. Its config names the
stack's ServiceAccount and pull secrets, so nothing else rewrites it: a
submit, status or cancel of that stack adopts it as it is (after checking it
allows the context they use), one of another stack is refused (the stack's
teardown gate would not see its runs), and only the stack's own ``up``
rewrites it; its ``destroy`` releases it.
"""

from __future__ import annotations

import copy
import os
import re
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.localstate import marker

__all__ = ["OWNER_FILE", "USER_ID", "ControllerSettings", "IsolatedDir", "controller_pod_config"]

USER_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]*$")
OWNER_FILE = "stack-owner"


class ControllerSettings(NamedTuple):
    """The jobs controller block of the generated config (2 CPU / 8 GB by default)."""

    cpus: int = 2
    memory_gb: int = 8
    pod_config: Mapping[str, Any] | None = None
    remote_identity: str | None = None


def controller_pod_config(
    base: Mapping[str, Any] | None, pull_secrets: Sequence[str], service_account: str
) -> dict[str, Any]:
    """The configured ``pod_config`` plus a stack's pull secrets and ServiceAccount.

    Configured pull secrets come first and are kept; the stack's own follow,
    without repeats (skypilot-0.12.md §9.3: this global layer may list any number).
    A configured ``serviceAccountName`` wins over the stack's account.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(base or {}))
    spec = merged.setdefault("spec", {})
    if pull_secrets:
        listed = list(spec.get("imagePullSecrets") or [])
        names = {p.get("name") for p in listed if isinstance(p, dict)}
        listed += [{"name": n} for n in pull_secrets if n not in names]
        spec["imagePullSecrets"] = listed
    if service_account:
        spec.setdefault("serviceAccountName", service_account)
    if not spec:
        merged.pop("spec")
    return merged


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink():
        raise ConfigError(
            f"{path} is a symlink; refusing to use it as SkyPilot state",
            remedy="point the isolated directory at a real directory",
        )


def _first_kubeconfig(env: Mapping[str, str]) -> Path | None:
    raw = env.get("KUBECONFIG") or str(Path(env.get("HOME") or Path.home()) / ".kube" / "config")
    for part in raw.split(os.pathsep):
        if part and Path(part).expanduser().is_file():
            return Path(part).expanduser().resolve()
    return None


class IsolatedDir(NamedTuple):
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def runtime(self) -> Path:
        return self.root / "sky-runtime"

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"

    @property
    def user_id_file(self) -> Path:
        return self.root / "user-id"

    @property
    def owner_file(self) -> Path:
        return self.root / OWNER_FILE

    def owner(self) -> str | None:
        """The stack whose controller resource wrote this directory's config, if any."""
        try:
            text = self.owner_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None

    def read_config(self) -> dict[str, Any]:
        """The generated config as written ({} when there is none).

        Raises:
            ConfigError: the file is not a YAML mapping.
        """
        try:
            data = yaml.safe_load(self.config_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"{self.config_file} is not valid YAML: {exc}",
                remedy="rerun the command that writes it (npa stack up for a stack's directory)",
            ) from exc
        if not isinstance(data, dict):
            raise ConfigError(
                f"{self.config_file} is not a YAML mapping",
                remedy="rerun the command that writes it (npa stack up for a stack's directory)",
            )
        return data

    def release(self) -> None:
        """Drop the stack's claim (its controller is gone); the config stays as it was."""
        self.owner_file.unlink(missing_ok=True)

    def user_id(self, env: Mapping[str, str]) -> str:
        """The controller identity: explicit env wins, else this directory's stored id (created once)."""
        explicit = env.get("SKYPILOT_USER_ID")
        if explicit:
            if not USER_ID.match(explicit):
                raise ConfigError(
                    f"SKYPILOT_USER_ID {explicit!r} is not a valid SkyPilot user id",
                    remedy="use letters, digits and '-', starting with a letter or digit",
                )
            return explicit
        self._make_root()
        stored = self._stored_id()
        if stored is None:
            # Create-if-absent with complete content: write a private temp file, then
            # hard-link it into place; a concurrent creator's link wins and we read it.
            fresh = f"npa-{secrets.token_hex(5)}"
            fd, tmp = tempfile.mkstemp(prefix=".user-id.", dir=self.root)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(fresh + "\n")
                os.chmod(tmp, 0o600)
                try:
                    os.link(tmp, self.user_id_file)
                except FileExistsError:
                    stored = self._stored_id()
                    if stored is None:
                        raise self._bad_id_file() from None
                    return stored
            finally:
                os.unlink(tmp)
            return fresh
        return stored

    def _make_root(self) -> None:
        """Create the directory 0700, marked as npa's when npa creates it or finds it empty:
        the proof ``npa cleanup --yes`` needs before it removes it (issue 24)."""
        _private_dir(self.root)  # refuses a symlink
        marker.make_dir(self.root, "state_dir")

    def _stored_id(self) -> str | None:
        try:
            text = self.user_id_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        if not USER_ID.match(text):
            raise self._bad_id_file()
        return text

    def _bad_id_file(self) -> ConfigError:
        return ConfigError(
            f"{self.user_id_file} does not hold a valid SkyPilot user id",
            remedy="restore the file from the directory's previous id; deleting it selects a NEW "
            "controller and leaves the old one's jobs unmanaged",
        )

    def controller_name(self, env: Mapping[str, str]) -> str:
        return f"sky-jobs-controller-{self.user_id(env)}"

    def prepare(
        self,
        env: Mapping[str, str],
        *,
        context: str | None,
        controller: ControllerSettings,
        stack: str | None = None,
        own: bool = False,
    ) -> None:
        """Create the directory layout, link the kubeconfig, write the generated config.

        ``own``: the stack's controller resource writes the config and claims the
        directory for ``stack``. Otherwise a directory ``stack`` owns is adopted
        as it is (module docstring).

        Raises:
            ConfigError: the directory belongs to another stack, or its config does
                not allow ``context``.
        """
        owner = self.owner()
        if not own and owner is not None:
            self._check_adoptable(owner, stack, context)
        self._make_root()
        for path in (self.home, self.runtime, self.root / "submissions"):
            _private_dir(path)
        kubeconfig = _first_kubeconfig(env)
        link = self.home / ".kube" / "config"
        if kubeconfig is not None:
            _private_dir(link.parent)
            if not (link.is_symlink() and link.resolve() == kubeconfig):
                _link(link, kubeconfig)
        nebius = Path(env.get("HOME") or Path.home()) / ".nebius"
        if nebius.is_dir() and not (self.home / ".nebius").is_symlink():
            _link(self.home / ".nebius", nebius)
        if own:
            if not stack:
                raise ConfigError(
                    "a stack-owned SkyPilot directory needs the stack's name",
                    remedy="report this: the controller resource always passes its stack",
                )
            self._write_config(self.generated_config(context, controller))
            _write_private(self.owner_file, stack + "\n")
        elif owner is None:
            self._write_config(self.generated_config(context, controller))

    def _check_adoptable(self, owner: str, stack: str | None, context: str | None) -> None:
        if stack != owner:
            raise ConfigError(
                f"{self.root} holds the SkyPilot controller of stack {owner}"
                + (f", not of stack {stack}" if stack else "")
                + f": runs launched from it would escape stack {owner}'s teardown gate",
                remedy=f"pass --stack {owner}, or choose another --isolated-config-dir",
            )
        allowed = (self.read_config().get("kubernetes") or {}).get("allowed_contexts")
        if context and allowed != [context]:
            raise ConfigError(
                f"stack {owner}'s SkyPilot config {self.config_file} allows "
                f"{allowed or 'no context'}, not {context}",
                remedy=f"use stack {owner}'s own context, or run `npa stack up --stack {owner} "
                "--yes` after changing npa-infra:context",
            )

    @staticmethod
    def generated_config(context: str | None, controller: ControllerSettings) -> dict[str, Any]:
        resources: dict[str, Any] = {
            "cloud": "kubernetes",
            "cpus": controller.cpus,
            "memory": controller.memory_gb,
        }
        if context:
            resources["region"] = context
        config: dict[str, Any] = {
            "jobs": {"controller": {"resources": resources, "autostop": False}}
        }
        kubernetes: dict[str, Any] = {}
        if context:
            kubernetes["allowed_contexts"] = [context]
        if controller.pod_config:
            kubernetes["pod_config"] = dict(controller.pod_config)
        if controller.remote_identity:
            kubernetes["remote_identity"] = controller.remote_identity
        if kubernetes:
            config["kubernetes"] = kubernetes
        return config

    def _write_config(self, data: dict[str, Any]) -> None:
        _write_private(self.config_file, yaml.safe_dump(data, sort_keys=True))

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The complete environment of every ``sky`` call under this directory."""
        child = dict(env)
        child.update(
            {
                "HOME": str(self.home),
                "SKY_RUNTIME_DIR": str(self.runtime),
                "SKYPILOT_GLOBAL_CONFIG": str(self.config_file),
                "SKYPILOT_USER_ID": self.user_id(env),
                "KUBECONFIG": str(self.home / ".kube" / "config"),
            }
        )
        # SKYPILOT_CONFIG replaces every config file; it must never leak in (§6)
        child.pop("SKYPILOT_CONFIG", None)
        child.pop("SKYPILOT_PROJECT_CONFIG", None)
        return child


def _unique_tmp(path: Path) -> Path:
    # a name of this process alone: two submits preparing one directory at once
    # must not write, or rename away, each other's temporary file
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, mode 0600."""
    tmp = _unique_tmp(path)
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)


def _link(path: Path, target: Path) -> None:
    """Point the symlink ``path`` at ``target`` atomically (a concurrent preparer's
    identical link is replaced, never a reason to fail)."""
    tmp = _unique_tmp(path)
    tmp.symlink_to(target)
    tmp.replace(path)


def resolve_isolated_dir(
    explicit: str | None, env: Mapping[str, str], config: Mapping[str, Any], stack: str | None
) -> IsolatedDir:
    """The state directory (skypilot-0.12.md §7.1): ``--isolated-config-dir``, then
    ``NPA_SKYPILOT_ISOLATED_CONFIG_DIR``, then ``skypilot.isolated_config_dir`` in the npa
    config, else one directory per stack under the npa home."""
    saved = npa_config.get_value(config, "skypilot.isolated_config_dir")
    chosen = (
        explicit
        or env.get("NPA_SKYPILOT_ISOLATED_CONFIG_DIR")
        or (saved if isinstance(saved, str) else "")
    )
    if chosen:
        return IsolatedDir(Path(chosen).expanduser())
    name = stack or "default"
    if not USER_ID.match(name):
        raise ConfigError(
            f"stack name {name!r} cannot name a state directory",
            remedy="use letters, digits and '-' in stack names",
        )
    return IsolatedDir(npa_config.npa_home(env) / "skypilot-state" / name)
