"""The effective config and run scope of a plan (dsl.md §2.2-§2.4).

Layers: the spec's ``config``, catalog ``config_defaults`` filling missing
keys, ``--var`` overrides; then config strings resolve against config and
``run`` in up to four passes. Errors are ``PlanError``s located at
``$.config.<key>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npa_infra.catalog.model import Catalog
from npa_infra.plan.model import PlanError
from npa_infra.spec import tokens
from npa_infra.spec.model import Spec

__all__ = ["PLACEHOLDER_BUCKETS", "bucket_is_placeholder", "build_scope"]

PLACEHOLDER_BUCKETS = ("", "example-bucket", "your-bucket", "my-bucket")
_PASSES = 4


def bucket_is_placeholder(config: Mapping[str, Any]) -> bool:
    if "bucket" not in config:
        return False
    bucket = tokens.stringify(config["bucket"])
    return bucket in PLACEHOLDER_BUCKETS or "<" in bucket or ">" in bucket


def build_scope(
    spec: Spec, catalog: Catalog, *, run_id: str, variables: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (config, run) with every config string resolved."""
    config: dict[str, Any] = dict(spec.config)
    config.update(variables)
    for state in spec.states.values():
        entry = catalog.get(state.tool_ref) if state.tool_ref else None
        if entry is not None:
            for key, value in entry.config_defaults.items():
                config.setdefault(key, value)
    run: dict[str, Any] = {"id": run_id, "prefix": f"{spec.name}/{run_id}"}
    for key, value in spec.run_defaults.items():
        run[str(key)] = value
    run["id"] = run_id
    ctx = tokens.TokenContext(config=config, run=run, allow_state=False, allow_loop=False)
    for key, value in list(config.items()):
        if isinstance(value, str):
            for _whole, scope, _k in tokens.find_tokens(value):
                if scope in ("state", "loop"):
                    raise PlanError(
                        ("config", key),
                        f"{scope}.* tokens are not allowed in config (found in {value!r})",
                        "move the value into the state's params, where loop and state tokens resolve",
                    )
    for _ in range(_PASSES):
        changed = False
        for key, value in list(config.items()):
            if isinstance(value, str) and "{{" in value:
                try:
                    new = tokens.resolve(value, ctx)
                except tokens.TokenError as exc:
                    raise PlanError(("config", key), exc.message, _config_hint(exc)) from None
                if new != value:
                    config[key] = new
                    changed = True
        if not changed:
            break
    for key, value in config.items():
        if isinstance(value, str) and tokens.find_tokens(value):
            raise PlanError(
                ("config", key),
                f"config value still holds tokens after {_PASSES} passes: {value!r}",
                "config references nest too deeply or form a cycle; reference values directly",
            )
    for key, value in list(run.items()):
        if isinstance(value, str) and "{{" in value:
            try:
                run[key] = tokens.resolve(value, ctx)
            except tokens.TokenError as exc:
                raise PlanError(("run", key), exc.message, _config_hint(exc)) from None
    if config.get("prefix"):
        run["prefix"] = tokens.stringify(config["prefix"])
    return config, run


def _config_hint(exc: tokens.TokenError) -> str:
    if exc.scope == "config":
        return "define the key under config:, or pass --var KEY=VALUE"
    return "config may reference only config.* and run.* tokens"
