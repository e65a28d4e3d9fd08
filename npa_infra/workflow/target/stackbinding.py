"""A submit bound to its stack: the checks that make it run against what the stack declared.

A live ``submit --stack NAME`` whose stack has been brought up runs against
the stack's outputs (pulumi.md §3), never against ad-hoc flags: its context,
its SkyPilot state directory and the config the stack's controller resource
wrote there (with its ServiceAccount and pull secrets), its controller, its
pull Secrets and its staged source. Each check here fails closed before
anything is journaled or launched, with the command that mends it:

- ``context``: ``--infra k8s/X`` beside a stack whose context is not X is
  refused: never a different cluster from the stack's.
- ``verify_adopted``: the state directory is the stack's own, claimed by its
  controller resource (``stack-owner``), its config is the one the outputs
  name, and its controller is the one they name.
- ``sky_config``: the SkyPilot config the launch will use, for the image
  pull probe: the stack's own file, else the one a submit generates.
- ``require_pull_secrets``: no rendered task pulls with a Secret the stack
  does not declare (its pod would wait on a missing Secret forever).

``record`` is what the run's journal keeps of the binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from npa_infra.errors import ConfigError, UsageError
from npa_infra.render.documents import RenderedJob
from npa_infra.skypilot.isolation import ControllerSettings, IsolatedDir
from npa_infra.workflow.target.stackfile import FROM_OUTPUTS, StackSettings

__all__ = [
    "context",
    "controller_settings",
    "record",
    "require_pull_secrets",
    "sky_config",
    "uncovered_pull_secrets",
    "verify_adopted",
]


def _up(stack: StackSettings) -> str:
    return f"npa stack up --stack {stack.name} --yes"


def context(infra: str | None, stack: StackSettings | None) -> str | None:
    """The exact context of a live submit: ``--infra k8s/<ctx>``, else the stack's.

    Raises:
        UsageError: ``--infra`` is not ``k8s/<context>``, or names another context
            than the stack's.
    """
    given: str | None = None
    if infra:
        given = infra.removeprefix("k8s/")
        if not infra.startswith("k8s/") or not given:
            raise UsageError(
                f"--infra {infra!r} is not k8s/<context>",
                remedy="pass the exact kubeconfig context, e.g. --infra k8s/my-cluster",
            )
    if stack is not None and stack.context and given and given != stack.context:
        raise UsageError(
            f"--infra k8s/{given} is not stack {stack.name}'s context ({stack.context}, "
            f"from its {stack.source}): a stack's runs never go to another cluster",
            remedy=f"drop --infra (the stack selects k8s/{stack.context}), or drop --stack",
        )
    return given or (stack.context if stack is not None and stack.context else None)


def controller_settings(stack: StackSettings | None) -> ControllerSettings:
    """The controller block a submit writes into a state directory no stack owns."""
    return ControllerSettings(
        cpus=stack.controller_cpus if stack else 2,
        memory_gb=stack.controller_memory_gb if stack else 8,
        pod_config=stack.controller_pod_config if stack else None,
    )


def verify_adopted(
    stack: StackSettings | None, isolated: IsolatedDir, env: Mapping[str, str]
) -> None:
    """For a submit from the stack's outputs: the directory, config and controller are theirs.

    Raises:
        ConfigError: the directory is not the stack's (or not claimed by it), the
            config is not the one the outputs name, or the controller differs.
    """
    if stack is None or stack.source != FROM_OUTPUTS:
        return
    where = f"stack {stack.name}'s SkyPilot state {isolated.root}"
    if isolated.owner() != stack.name or not isolated.config_file.is_file():
        raise ConfigError(
            f"{where} holds no config written by `npa stack up` on this machine",
            remedy=f"{_up(stack)} (it writes the controller's config here), or run the submit "
            "where the stack was brought up",
        )
    named = stack.skypilot_config_path
    if named and Path(named).expanduser().resolve() != isolated.config_file.resolve():
        raise ConfigError(
            f"{where}: its config is {isolated.config_file}, but the stack's outputs name {named}",
            remedy=f"drop --isolated-config-dir (the stack selects its own), or {_up(stack)}",
        )
    actual = isolated.controller_name(env)
    if stack.controller_name and actual != stack.controller_name:
        raise ConfigError(
            f"{where} resolves controller {actual}, but the stack declares "
            f"{stack.controller_name}: jobs would go to a controller its teardown never sees",
            remedy=f"unset SKYPILOT_USER_ID (the directory's own identity is the stack's), "
            f"or {_up(stack)} to adopt the new identity",
        )


def sky_config(stack: StackSettings | None, context_name: str) -> dict[str, Any]:
    """The SkyPilot config a live submit of ``stack`` on ``context_name`` launches with.

    Raises:
        ConfigError: the stack's config file is missing or unreadable.
    """
    if stack is not None and stack.source == FROM_OUTPUTS and stack.isolated_config_dir:
        isolated = IsolatedDir(Path(stack.isolated_config_dir).expanduser())
        if not isolated.config_file.is_file():
            raise ConfigError(
                f"stack {stack.name}'s SkyPilot config {isolated.config_file} does not exist",
                remedy=_up(stack),
            )
        return isolated.read_config()
    return IsolatedDir.generated_config(context_name, controller_settings(stack))


def _pull_secrets(documents: Iterable[Mapping[str, Any]]) -> set[str]:
    names: set[str] = set()
    for doc in documents:
        kube = (doc.get("config") or {}).get("kubernetes") or {}
        spec = (kube.get("pod_config") or {}).get("spec") or {}
        for entry in spec.get("imagePullSecrets") or []:
            if isinstance(entry, Mapping) and entry.get("name"):
                names.add(str(entry["name"]))
    return names


def uncovered_pull_secrets(jobs: Iterable[RenderedJob], stack: StackSettings | None) -> list[str]:
    """Pull Secrets the rendered tasks name that the stack's outputs do not declare."""
    if stack is None or stack.source != FROM_OUTPUTS:
        return []
    named: set[str] = set()
    for job in jobs:
        named |= _pull_secrets(job.documents)
    return sorted(named - set(stack.pull_secret_names))


def require_pull_secrets(jobs: Iterable[RenderedJob], stack: StackSettings | None) -> None:
    """Refuse tasks that pull with a Secret the stack does not declare.

    Raises:
        ConfigError: names the Secrets, the stack's own and the fix.
    """
    missing = uncovered_pull_secrets(jobs, stack)
    if missing and stack is not None:
        declared = ", ".join(stack.pull_secret_names) or "none"
        raise ConfigError(
            f"the rendered tasks pull with Secret(s) {', '.join(missing)}, which stack "
            f"{stack.name} does not declare (its pull secrets: {declared})",
            remedy="add the registry to npa-infra:registries in "
            f"stacks/Pulumi.{stack.name}.yaml (its first Secret is named npa-nebius-registry), "
            f"then {_up(stack)}",
        )


def record(stack: StackSettings | None) -> dict[str, Any]:
    """What the run was bound to, journaled with it (``status`` and teardown read it)."""
    if stack is None:
        return {}
    return {
        "stack": {
            "name": stack.name,
            "source": stack.source,
            "context": stack.context,
            "namespace": stack.namespace,
            "service_account": stack.service_account,
            # Secret names only, under the journal's key for them (journal.guard)
            "imagePullSecrets": [{"name": n} for n in stack.pull_secret_names],
            "src_s3_uri": stack.src_s3_uri or None,
            "controller_name": stack.controller_name or None,
            "skypilot_config_path": stack.skypilot_config_path or None,
        }
    }
