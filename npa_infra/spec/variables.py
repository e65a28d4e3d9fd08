"""Which config keys a spec reads, so a ``--var`` nobody reads is reported (dsl.md §2.4, issue 18).

A key is read when a ``{{config.K}}`` token or a bare ``config.K`` reference
names it anywhere in the document, when the spec's own ``config`` declares it
(overriding a declared key is the point of ``--var``), when a tool the spec
uses names it (its argv template, its ``config_defaults``, its shard and
variant keys), or when the engine itself reads it (``ENGINE_KEYS``). Pure: the
caller passes the document and the catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from npa_infra.catalog.model import Catalog
from npa_infra.spec import tokens
from npa_infra.spec.model import Spec
from npa_infra.spec.parse import suggest

__all__ = ["ENGINE_KEYS", "reads", "unread"]

# keys the planner and renderer read from the effective config (dsl.md §2.2, §3, §6)
ENGINE_KEYS = frozenset(
    [
        "aws_endpoint_url",
        "baked_npa_import",
        "bucket",
        "checkpoint_loader",
        "checkpoint_uri",
        "decision_uri",
        "plan_assume_decision",
        "prefix",
        "require_baked_npa",
        "source_overlay",
        "source_sha",
    ]
)
_BARE_REF = re.compile(r"(?<![A-Za-z0-9_.{])config\.([A-Za-z0-9_.-]+)")


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _names(text: str) -> Iterator[str]:
    for _whole, scope, key in tokens.find_tokens(text):
        if scope == "config":
            yield key
    for match in _BARE_REF.finditer(text):
        yield match.group(1)


def reads(spec: Spec, data: object, catalog: Catalog) -> set[str]:
    """Every config key the document, its tools or the engine read (dotted keys and their heads)."""
    found: set[str] = set(ENGINE_KEYS) | set(spec.config)
    texts = list(_strings(data))
    for state in spec.states.values():
        entry = catalog.get(state.tool_ref) if state.tool_ref else None
        if entry is None:
            continue
        texts.extend(entry.argv_template)
        found.update(entry.config_defaults)
        found.update(
            k
            for k in (
                entry.variant_count_config,
                entry.shard_activation_config,
                entry.shard_output_config,
            )
            if k
        )
    for text in texts:
        for name in _names(text):
            found.add(name)
            found.add(name.split(".", 1)[0])
    return found


def unread(
    spec: Spec, data: object, catalog: Catalog, variables: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(key, did-you-mean or empty) for each ``--var`` key the spec never reads, in given order."""
    if not variables:
        return []
    known = reads(spec, data, catalog)
    return [(key, suggest(key, sorted(known))) for key in variables if key not in known]
