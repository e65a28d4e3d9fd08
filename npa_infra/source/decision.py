"""Which source a submit uses, and whether it stages: pure (runtime-reference.md §6).

``requirement`` says which steps need source: an image-less step runs from
the staged tree, and ``config.source_overlay: true`` overlays it on every
step's image. ``decide`` then picks one of keep, reuse, stage, refuse, as one
ordered chain of early returns (style.md rule 2); the executor
(``staging``, ``workflow.submission.sourcing``) does the effects.

Precedence, first match wins:

1. no step needs source: nothing to do (``--stage-src`` is moot);
2. ``--resume-run`` of a run whose journal recorded a URI: keep it, because
   the URI is part of the rendered YAML and so of the launch identity
   (runtime-reference.md §1 ``--resume-run``);
3. ``--stage-src``: stage the local checkout, even over an exported URI;
4. ``NPA_SRC_S3_URI``, then ``NPA_E2E_NPA_SRC_S3_URI``: an explicit selection, kept
   as given; never stale;
4a. the stack's own staged source (``src_s3_uri`` of a stack that was brought
   up: pulumi.md §3, runs use what the stack declared): kept (its marker checked
   before launch) when there is no checkout to compare with or the checkout's
   fingerprint is the URI's; refused when the checkout differs, because the run
   would silently use older source (``npa stack up`` restages it as the stack's
   source; ``--stage-src`` stages this checkout for this run);
5. the saved URI whose last segment is the local fingerprint: reuse it (its
   marker is checked before launch, and a miss restages the same prefix, or
   fails under ``--no-stage-src``);
6. with ``--no-stage-src``: refuse, since whatever is left needs staging;
7. a saved URI but no local checkout to compare with: keep it as given;
8. no local checkout: refuse;
9. no bucket to stage into: refuse;
10. stage: the saved URI is outdated, or there is none.

A staged URI is known before any upload: ``s3://<bucket>/<prefix>/<fingerprint>/``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from npa_infra.source import fingerprint as fp

__all__ = [
    "DEFAULT_PREFIX",
    "SourceAction",
    "SourceDecision",
    "SourceInputs",
    "SourceOrigin",
    "SourceReason",
    "decide",
    "prefix_uri",
    "requirement",
    "uri_fingerprint",
]

DEFAULT_PREFIX = "npa-src/npa"


class SourceAction(StrEnum):
    NOT_REQUIRED = "not_required"
    KEEP = "keep"  # use the URI as given (verified when it ends in a fingerprint)
    REUSE = "reuse"  # the saved URI matches the checkout: verify its marker, restage on a miss
    STAGE = "stage"  # upload the checkout (unless its prefix already holds a verified copy)
    REFUSE = "refuse"  # source is needed and cannot be had: fail before anything happens


class SourceOrigin(StrEnum):
    NONE = "none"
    JOURNAL = "journal"
    ENVIRONMENT = "environment"  # NPA_SRC_S3_URI
    E2E_ENVIRONMENT = "e2e_environment"  # NPA_E2E_NPA_SRC_S3_URI
    STACK = "stack"  # the stack outputs' src_s3_uri
    SAVED = "saved"
    CHECKOUT = "checkout"


class SourceReason(StrEnum):
    NOT_REQUIRED = "not_required"
    RESUMED = "resumed_run"
    FORCED = "forced"
    EXPLICIT = "explicit"
    STACK_CURRENT = "stack_current"
    STACK_UNCHECKED = "stack_unchecked"
    STACK_OUTDATED = "stack_outdated"
    SAVED_CURRENT = "saved_current"
    NO_STAGE_OUTDATED = "no_stage_saved_outdated"
    NO_STAGE_MISSING = "no_stage_missing"
    SAVED_UNCHECKED = "saved_unchecked"
    NO_CHECKOUT = "no_checkout"
    NO_BUCKET = "no_bucket"
    SAVED_OUTDATED = "saved_outdated"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class SourceInputs:
    """Everything ``decide`` looks at; the caller gathers it (env, config, journal, disk)."""

    needed: bool
    force: bool = False  # --stage-src
    no_stage: bool = False  # --no-stage-src
    journal_uri: str = ""  # the resumed run's recorded URI
    env_uri: str = ""
    env_origin: SourceOrigin = SourceOrigin.ENVIRONMENT
    stack_uri: str = ""  # the stack's outputs' src_s3_uri
    saved_uri: str = ""
    local_fingerprint: str = ""  # empty: no checkout to stage from
    bucket: str = ""
    prefix: str = DEFAULT_PREFIX


@dataclass(frozen=True, slots=True)
class SourceDecision:
    action: SourceAction
    reason: SourceReason
    origin: SourceOrigin = SourceOrigin.NONE
    uri: str = ""
    fingerprint: str = ""  # the local one when staging; the URI's own when it ends in one

    @property
    def would_stage(self) -> bool:
        return self.action is SourceAction.STAGE

    @property
    def verify(self) -> bool:
        """Whether the marker must be checked before launch (a URI ending in a fingerprint)."""
        return self.action in (SourceAction.KEEP, SourceAction.REUSE) and bool(self.fingerprint)


def requirement(steps: Iterable[tuple[str, str | None]], *, overlay: bool) -> tuple[str, ...]:
    """The states that need source, sorted: every one under overlay, else the image-less."""
    return tuple(sorted({state for state, image in steps if overlay or image is None}))


def prefix_uri(bucket: str, prefix: str, fingerprint: str) -> str:
    """``s3://<bucket>/<prefix>/<fingerprint>/`` (an empty prefix puts it at the bucket's root)."""
    clean = prefix.strip("/")
    return f"s3://{bucket}/{clean}/{fingerprint}/" if clean else f"s3://{bucket}/{fingerprint}/"


def uri_fingerprint(uri: str) -> str:
    """The URI's last path segment when it is a fingerprint, else ``""``."""
    last = uri.rstrip("/").rpartition("/")[2]
    return last if fp.is_fingerprint(last) else ""


def decide(inputs: SourceInputs) -> SourceDecision:
    """The source action for a submit (the precedence is in the module docstring)."""
    i = inputs
    if not i.needed:  # §6: staging happens only "when source is needed"
        return SourceDecision(SourceAction.NOT_REQUIRED, SourceReason.NOT_REQUIRED)
    if i.journal_uri:  # §1 --resume-run: identical YAML, identical launch identity
        return _keep(SourceReason.RESUMED, SourceOrigin.JOURNAL, i.journal_uri)
    if i.force and i.local_fingerprint and i.bucket:  # §6: --stage-src forces staging
        return _stage(SourceReason.FORCED, i)
    if i.env_uri and not i.force:  # §6: environment URIs are explicit and never stale
        return _keep(SourceReason.EXPLICIT, i.env_origin, i.env_uri)
    if i.stack_uri and not i.force:  # pulumi.md §3: the source the stack declared
        if not i.local_fingerprint:
            return _keep(SourceReason.STACK_UNCHECKED, SourceOrigin.STACK, i.stack_uri)
        if uri_fingerprint(i.stack_uri) == i.local_fingerprint:
            return _keep(SourceReason.STACK_CURRENT, SourceOrigin.STACK, i.stack_uri)
        return SourceDecision(
            SourceAction.REFUSE,
            SourceReason.STACK_OUTDATED,
            SourceOrigin.STACK,
            i.stack_uri,
            i.local_fingerprint,
        )
    saved_fp = uri_fingerprint(i.saved_uri)
    if i.saved_uri and not i.force and saved_fp and saved_fp == i.local_fingerprint:
        # With --no-stage-src a marker miss must fail, not restage: keep (verify only).
        action = SourceAction.KEEP if i.no_stage else SourceAction.REUSE
        return SourceDecision(
            action, SourceReason.SAVED_CURRENT, SourceOrigin.SAVED, i.saved_uri, saved_fp
        )
    if i.no_stage:  # cli.md §1.4: never stage; what is left would need staging
        reason = SourceReason.NO_STAGE_OUTDATED if i.saved_uri else SourceReason.NO_STAGE_MISSING
        return SourceDecision(SourceAction.REFUSE, reason, SourceOrigin.SAVED, i.saved_uri)
    if i.saved_uri and not i.local_fingerprint and not i.force:
        return _keep(SourceReason.SAVED_UNCHECKED, SourceOrigin.SAVED, i.saved_uri)
    if not i.local_fingerprint:
        return SourceDecision(SourceAction.REFUSE, SourceReason.NO_CHECKOUT)
    if not i.bucket:
        return SourceDecision(
            SourceAction.REFUSE, SourceReason.NO_BUCKET, fingerprint=i.local_fingerprint
        )
    reason = SourceReason.SAVED_OUTDATED if i.saved_uri else SourceReason.MISSING
    return _stage(reason, i)


def _keep(reason: SourceReason, origin: SourceOrigin, uri: str) -> SourceDecision:
    return SourceDecision(SourceAction.KEEP, reason, origin, uri, uri_fingerprint(uri))


def _stage(reason: SourceReason, i: SourceInputs) -> SourceDecision:
    return SourceDecision(
        SourceAction.STAGE,
        reason,
        SourceOrigin.CHECKOUT,
        prefix_uri(i.bucket, i.prefix, i.local_fingerprint),
        i.local_fingerprint,
    )
