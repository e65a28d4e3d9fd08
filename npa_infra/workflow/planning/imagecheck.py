"""Image preflight for the spec commands: which registry client, which images, one report.

Shared by ``preflight-images`` (``api.preflight_images``) and ``submit``:
both select the catalog registry the same way (``--registry``, the stack's,
``NPA_REGISTRY``, the default; dsl.md §6.2), resolve the same images with the
renderer's rules, and check them on the client ``Services.registry`` opens
(``workflow.target.services``: credentials from the process environment, then the
stack's credentials file, registry.md §2.1; trusted token realms from
``registry.trusted_token_realms`` in ``$NPA_HOME/config.yaml``). The registries
whose ``npa-*`` images must carry the bootstrap-contract label are the
project's default one plus ``NPA_PUBLIC_REGISTRY`` and ``NPA_REGISTRY``
(runtime-reference.md §8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from npa_infra.catalog import images as pins
from npa_infra.catalog.model import Catalog
from npa_infra.render import images
from npa_infra.spec.model import Spec
from npa_infra.workflow.target import stackfile

if TYPE_CHECKING:
    from npa_infra.registry.base import Registry
    from preflight.images import ImagePreflightReport

__all__ = ["catalog_registry", "run", "trusted_registries"]


def catalog_registry(
    explicit: str | None,
    stack: stackfile.StackSettings | None,
    env: Mapping[str, str],
    release_namespace: str | None = None,
) -> str:
    """``--registry``, else the stack's, else ``NPA_REGISTRY``, else the selected project's
    release namespace (``npa configure --release-namespace``), else the default."""
    return (
        explicit
        or (stack.registry if stack else "")
        or env.get("NPA_REGISTRY")
        or release_namespace
        or pins.DEFAULT_REGISTRY
    )


def trusted_registries(env: Mapping[str, str]) -> tuple[str, ...]:
    """``ghcr.io/nebius/nebius-physical-ai``, ``NPA_PUBLIC_REGISTRY``, ``NPA_REGISTRY`` (when set)."""
    found = (pins.DEFAULT_REGISTRY, env.get("NPA_PUBLIC_REGISTRY"), env.get("NPA_REGISTRY"))
    return tuple(dict.fromkeys(r.strip() for r in found if r and r.strip()))


def run(
    spec: Spec,
    catalog: Catalog,
    *,
    run_id: str,
    selection: images.ImageSelection,
    client: Registry,
    variables: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ImagePreflightReport:
    """Check every control-flow-reachable image of ``spec`` once, concurrently.

    ``env`` names the trusted registries (``trusted_registries``); without it
    only the project's default registry is trusted.

    Raises:
        PlanError: a profile token does not resolve (validation reports it first).
    """
    from preflight import images as preflight_images
    from preflight import targets

    found = targets.image_targets(
        spec, catalog, run_id=run_id, selection=selection, variables=variables
    )
    return preflight_images.check_images(
        found, client, trusted_registries=trusted_registries(env or {})
    )
