"""NPA source for a submit, and ``stage-src``: gather the inputs, decide, then stage.

``plan_source`` runs before rendering, for ``--plan-only`` and live submits
alike, and writes nothing: it works out which steps need source, reads the
selection (the resumed run's journal, ``NPA_SRC_S3_URI``, then
``NPA_E2E_NPA_SRC_S3_URI``, then the stack's staged source from its outputs,
then the saved URI), fingerprints the local
checkout when it may have to stage it, and lets ``source.decision.decide``
choose. The chosen URI is known before any upload (content addressing), so
the task YAML is rendered with it at once.

``apply`` is the effect, run by ``supervision.runner.execute`` after the run is durable in
the journal with its planned source action and before the first launch
(runtime-reference.md §1 receipt order: ``planned`` before staging): it stages
or reuses the checkout, or checks the marker of a kept URI that ends in a
fingerprint, and saves a newly staged URI for the stack.

Saved URIs live in ``$NPA_HOME/config.yaml``: under ``stacks.<stack>.src_s3_uri``
for a submit with ``--stack``, else the top-level ``src_s3_uri`` (the key
``npa configure --src-s3-uri`` writes); a stack without its own entry falls
back to the top-level one. Keying by stack keeps two stacks in different
buckets from flip-flopping one saved URI.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, InvariantError, StorageError, UsageError
from npa_infra.plan import context
from npa_infra.plan.model import Plan
from npa_infra.render import images
from npa_infra.source import decision
from npa_infra.source.decision import SourceAction, SourceOrigin, SourceReason
from npa_infra.spec.model import Spec
from npa_infra.workflow.target import stackfile
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    # Staging (and the store) load where source is staged, not to plan it; the checkout
    # scanner, the marker and the S3 URI model where a step needs source, so a plan whose
    # steps all have images never loads them (submit --plan-only, issue 19).
    from npa_infra.source import marker, staging, tree
    from npa_infra.storage.base import ObjectStore

__all__ = [
    "E2E_SRC_ENV",
    "SRC_ENV",
    "SourcePlan",
    "SourceRequest",
    "apply",
    "default_checkout",
    "plan_source",
    "save_uri",
    "saved_uri",
    "stage_src",
]

SRC_ENV = "NPA_SRC_S3_URI"
E2E_SRC_ENV = "NPA_E2E_NPA_SRC_S3_URI"
SAVED_KEY = "src_s3_uri"


@dataclass(frozen=True, slots=True)
class SourceRequest:
    """The submit options that bear on source."""

    stage_src: bool = False  # --stage-src
    no_stage_src: bool = False  # --no-stage-src
    source_root: Path | None = None  # --source; default: npa-infra's editable checkout
    stack_name: str | None = None
    resume_run: str | None = None
    plan_only: bool = False


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """The decided source of a submit, and what ``apply`` needs to carry it out."""

    decision: decision.SourceDecision
    states: tuple[str, ...] = ()
    root: Path | None = None
    stack_name: str | None = None
    s3_endpoint: str = ""
    scanned: tree.SourceTree | None = None

    @property
    def uri(self) -> str:
        return self.decision.uri

    def to_json(self) -> dict[str, Any]:
        """``source`` of the ``--plan-only`` JSON (cli.md §1.4) and the journaled plan."""
        d = self.decision
        return {
            "status": d.action.value,
            "uri": d.uri or None,
            "would_stage": d.would_stage,
            "fingerprint": d.fingerprint or None,
            "reason": d.reason.value,
            "origin": d.origin.value,
            "states": list(self.states),
            "root": str(self.root) if self.root and d.origin is SourceOrigin.CHECKOUT else None,
        }


def needed_states(
    spec: Spec, plan: Plan, selection: images.ImageSelection, *, runtime: bool
) -> tuple[str, ...]:
    """The states that need source: image-less ones, or all under ``config.source_overlay``.

    A runtime plan is only the prefix up to the first unread decision, so for
    runtime every state that does work counts, whichever route it takes later.
    """
    pairs = [
        (s.state, images.resolve_image(s.tool_ref, s.resources_profile.get("image"), selection))
        for s in plan.steps
    ]
    if runtime:
        for state in spec.states.values():
            if state.has_work:
                profile = spec.resources.get(state.resources) or spec.resources.get("default")
                raw = (profile or {}).get("image")
                pairs.append((state.name, images.resolve_image(state.tool_ref, raw, selection)))
    overlay = _truthy(plan.config.get("source_overlay"))
    return decision.requirement(pairs, overlay=overlay)


def plan_source(
    spec: Spec,
    plan: Plan,
    *,
    selection: images.ImageSelection,
    runtime: bool,
    request: SourceRequest,
    env: Mapping[str, str],
    stack: stackfile.StackSettings | None,
) -> SourcePlan:
    """Decide the source of a submit; reads only (``--plan-only`` writes nothing).

    Raises:
        UsageError: ``--stage-src`` with ``--no-stage-src``, or with ``--image IMG``.
        ConfigError: source is needed and cannot be had (the message says what was
            checked), a selected URI is not ``s3://bucket/key``, or the checkout
            cannot be read.
    """
    _check_flags(request, selection)
    states = needed_states(spec, plan, selection, runtime=runtime)
    if not states:
        return SourcePlan(decision.decide(decision.SourceInputs(needed=False)))
    journal_uri = ""
    if request.resume_run and not request.plan_only:
        journal_uri = _journaled_uri(env, request.resume_run)
    env_origin, env_uri = _env_selection(env)
    saved = saved_uri(env, request.stack_name)
    root = request.source_root or default_checkout()
    scanned = None
    if root is not None and not journal_uri and (request.stage_src or not env_uri):
        from npa_infra.source import tree

        scanned = tree.scan(root)
    bucket = (stack.bucket if stack else "") or _config_bucket(plan.config)
    prefix = (stack.source_prefix if stack else "") or decision.DEFAULT_PREFIX
    inputs = decision.SourceInputs(
        needed=True,
        force=request.stage_src,
        no_stage=request.no_stage_src,
        journal_uri=journal_uri,
        env_uri=env_uri,
        env_origin=env_origin,
        stack_uri=stack.src_s3_uri if stack else "",
        saved_uri=saved,
        local_fingerprint=scanned.fingerprint if scanned else "",
        bucket=bucket,
        prefix=prefix,
    )
    chosen = decision.decide(inputs)
    if chosen.action is SourceAction.REFUSE:
        raise _refusal(chosen, states, root, scanned, env, request.stack_name)
    return SourcePlan(
        chosen,
        states,
        root,
        request.stack_name,
        stack.s3_endpoint if stack else "",
        scanned,
    )


def apply(
    plan: SourcePlan, *, env: Mapping[str, str], services: Services | None = None
) -> dict[str, Any]:
    """Carry out the decided source action; returns the record journaled as ``source_staging``.

    Raises:
        ConfigError: a kept URI has no complete staged source, or the checkout changed.
        StorageError: staging or the marker check failed (credentials errors say where
            boto3 looked).
    """
    d = plan.decision
    record: dict[str, Any] = {"action": d.action.value, "reason": d.reason.value, "uri": d.uri}
    if d.action is SourceAction.NOT_REQUIRED:
        return {**record, "decision": "not_required"}
    if d.action is SourceAction.KEEP and not d.verify:
        return {**record, "decision": "kept", "verified": False}
    from npa_infra.source import marker, staging

    s3 = (services or Services()).store(plan.s3_endpoint or None)
    if d.action is SourceAction.KEEP:
        verdict = staging.verify_prefix(d.uri, s3, env=env)
        if verdict is marker.MarkerVerdict.MATCH:
            return {**record, "decision": "verified", "fingerprint": d.fingerprint}
        scanned = _restageable(plan)
        if scanned is None:
            raise _unverified(plan, verdict)
        return _staged(plan, scanned, s3, env, force=False, record=record)
    if plan.scanned is None:
        raise InvariantError(f"source action {d.action.value} without a scanned checkout")
    return _staged(
        plan, plan.scanned, s3, env, force=d.reason is SourceReason.FORCED, record=record
    )


def stage_src(
    source: Path | None = None,
    *,
    bucket: str | None = None,
    prefix: str | None = None,
    stack: str | None = None,
    force: bool = False,
    env: Mapping[str, str] | None = None,
    project_root: Path | None = None,
    services: Services | None = None,
) -> staging.StageResult:
    """``npa workbench workflow stage-src``: stage a checkout, or reuse its verified prefix.

    The tree is ``source``, else npa-infra's own editable checkout; the bucket
    is ``bucket``, else the stack file's ``npa-infra:bucket``; the prefix is
    ``prefix``, else ``npa-infra:sourcePrefix``, else ``npa-src/npa``. A new or
    reused URI is saved for the stack, so the next submit reuses it.

    Raises:
        UsageError: no tree or no bucket was given and none can be inferred.
        ConfigError: the stack file or the checkout cannot be read, or it changed.
        StorageError: the upload or the marker check failed.
    """
    environ = os.environ if env is None else env
    root = source or default_checkout()
    if root is None:
        raise UsageError(
            "no source directory: npa-infra is not installed from an editable checkout",
            remedy="pass --source DIR naming the checkout to stage",
        )
    settings = stackfile.read_stack(stack, project_root or Path.cwd()) if stack else None
    chosen_bucket = bucket or (settings.bucket if settings else "")
    if not chosen_bucket:
        raise UsageError(
            "no bucket to stage into: --bucket was not given"
            + (f" and stack '{stack}' sets no npa-infra:bucket" if stack else ""),
            remedy="pass --bucket BUCKET, or --stack NAME whose stack file sets npa-infra:bucket",
        )
    chosen_prefix = (
        prefix if prefix is not None else (settings.source_prefix if settings else "")
    ) or decision.DEFAULT_PREFIX
    s3 = (services or Services()).store((settings.s3_endpoint if settings else "") or None)
    _connect_in_background(s3)  # the boto3 client builds while the tree is scanned
    from npa_infra.source import staging

    result = staging.stage_source(
        root, chosen_bucket, chosen_prefix, store=s3, force=force, env=environ
    )
    if saved_uri(environ, stack) != result.uri:
        save_uri(environ, stack, result.uri)
    return result


def default_checkout() -> Path | None:
    """npa-infra's own source tree when it is installed editable (PEP 610 ``direct_url.json``)."""
    from importlib import metadata

    for dist in metadata.distributions(name="npa-infra"):
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        try:
            info = json.loads(text)
        except ValueError:
            continue
        url = info.get("url") if isinstance(info, dict) else None
        editable = isinstance(info, dict) and (info.get("dir_info") or {}).get("editable")
        if editable and isinstance(url, str) and url.startswith("file://"):
            path = Path(unquote(urlparse(url).path))
            if path.is_dir():
                return path
    return None


def saved_uri(env: Mapping[str, str], stack: str | None) -> str:
    """The saved URI for ``stack`` (falling back to the top-level one), or ``""``.

    Raises:
        ConfigError: the config file is unreadable, or the value is not ``s3://bucket/key``.
    """
    config = npa_config.load_config(env)
    stacks = config.get("stacks")
    entry = stacks.get(stack) if stack and isinstance(stacks, dict) else None
    value = entry.get(SAVED_KEY) if isinstance(entry, dict) else None
    if not value:
        value = config.get(SAVED_KEY)
    if not value:
        return ""
    where = f"{npa_config.config_path(env)} ({'stacks.' + stack + '.' if stack else ''}{SAVED_KEY})"
    return _checked_uri(str(value), where)


def save_uri(env: Mapping[str, str], stack: str | None, uri: str) -> Path:
    """Save ``uri`` for ``stack`` (top-level without one) under the config file's lock, as
    every read-merge-write of npa's own files is (issue 24); returns the config path."""

    def change(config: dict[str, Any]) -> dict[str, Any]:
        if stack:
            stacks = dict(config.get("stacks") or {})
            entry = stacks.get(stack)
            stacks[stack] = {**(entry if isinstance(entry, dict) else {}), SAVED_KEY: uri}
            config["stacks"] = stacks
        else:
            config[SAVED_KEY] = uri
        return config

    return npa_config.update_config(env, change)


def _check_flags(request: SourceRequest, selection: images.ImageSelection) -> None:
    if request.stage_src and request.no_stage_src:
        raise UsageError(
            "--stage-src and --no-stage-src are mutually exclusive",
            remedy="pass --stage-src to force restaging, or --no-stage-src to never stage",
        )
    image = selection.global_image
    if request.stage_src and image is not None and image.strip().lower() not in images.NO_IMAGE:
        raise UsageError(
            f"--stage-src conflicts with --image {image}: every step runs in that image",
            remedy="drop --image to run image-less steps from staged source, or drop --stage-src",
        )


def _env_selection(env: Mapping[str, str]) -> tuple[SourceOrigin, str]:
    for name, origin in (
        (SRC_ENV, SourceOrigin.ENVIRONMENT),
        (E2E_SRC_ENV, SourceOrigin.E2E_ENVIRONMENT),
    ):
        value = env.get(name, "").strip()
        if value:
            return origin, _checked_uri(value, name)
    return SourceOrigin.ENVIRONMENT, ""


def _checked_uri(value: str, where: str) -> str:
    from npa_infra.storage.models import S3Uri

    try:
        parsed = S3Uri.parse(value)
    except StorageError as exc:
        raise ConfigError(
            f"{where} is not s3://bucket/key: {exc.message}",
            remedy=f"set {where} to the URI `npa workbench workflow stage-src` printed",
        ) from None
    if not parsed.key.strip("/"):
        raise ConfigError(
            f"{where} names a whole bucket ({value}), not a source prefix",
            remedy="use s3://bucket/<prefix>/<fingerprint>/ as `stage-src` prints it",
        )
    return value


def _config_bucket(config: Mapping[str, Any]) -> str:
    bucket = config.get("bucket")
    if not isinstance(bucket, str) or not bucket or context.bucket_is_placeholder(config):
        return ""
    return bucket


def _journaled_uri(env: Mapping[str, str], run_id: str) -> str:
    """The source URI the run recorded when it was first submitted, or ``""``."""
    from npa_infra.journal.store import Journal, journal_path

    home = npa_config.npa_home(env)
    if not journal_path(home).is_file():
        return ""
    journal = Journal.open(home)
    try:
        row = journal.get_run(run_id)
    finally:
        journal.close()
    source = row.data.get("source") if row is not None else None
    uri = source.get("uri") if isinstance(source, dict) else None
    return uri if isinstance(uri, str) else ""


def _staged(
    plan: SourcePlan,
    scanned: tree.SourceTree,
    store: ObjectStore,
    env: Mapping[str, str],
    *,
    force: bool,
    record: dict[str, Any],
) -> dict[str, Any]:
    """Stage into the decided URI's own bucket and prefix, and save a newly staged URI."""
    from npa_infra.source import staging
    from npa_infra.storage.models import S3Uri

    target = S3Uri.parse(plan.uri)
    prefix = target.key.rstrip("/").rpartition("/")[0]
    result = staging.stage_source(
        scanned.root, target.bucket, prefix, store=store, force=force, scanned=scanned, env=env
    )
    if result.uri.rstrip("/") != plan.uri.rstrip("/"):
        raise InvariantError(f"staged {result.uri}, but the tasks were rendered with {plan.uri}")
    saved = False
    if (
        plan.decision.origin is SourceOrigin.CHECKOUT
        and saved_uri(env, plan.stack_name) != plan.uri
    ):
        save_uri(env, plan.stack_name, plan.uri)
        saved = True
    return {
        **record,
        "decision": "reused" if result.reused else "staged",
        **result.to_json(),
        "uri": plan.uri,
        "saved": saved,
    }


def _restageable(plan: SourcePlan) -> tree.SourceTree | None:
    """A resumed run's URI whose prefix lost its marker, when the checkout still matches it."""
    if plan.decision.origin is not SourceOrigin.JOURNAL or plan.root is None:
        return None
    from npa_infra.source import tree

    scanned = tree.scan(plan.root)
    return scanned if scanned.fingerprint == plan.decision.fingerprint else None


def _unverified(plan: SourcePlan, verdict: marker.MarkerVerdict) -> ConfigError:
    d = plan.decision
    where = {
        SourceOrigin.ENVIRONMENT: SRC_ENV,
        SourceOrigin.E2E_ENVIRONMENT: E2E_SRC_ENV,
        SourceOrigin.SAVED: "the saved src_s3_uri",
        SourceOrigin.JOURNAL: "the resumed run's source",
        SourceOrigin.STACK: f"stack {plan.stack_name}'s staged source",
    }.get(d.origin, "the source URI")
    if d.origin is SourceOrigin.STACK:
        return ConfigError(
            f"{where} {d.uri} holds no complete staged source: its marker is {verdict.value}",
            remedy=f"npa stack refresh --stack {plan.stack_name} --yes, then npa stack up "
            f"--stack {plan.stack_name} --yes (it stages the source again)",
            details={"uri": d.uri, "marker": verdict.value, "origin": d.origin.value},
        )
    return ConfigError(
        f"{where} {d.uri} holds no complete staged source: its marker is {verdict.value}",
        remedy="run `npa workbench workflow stage-src` and export the URI it prints, or unset "
        f"{SRC_ENV}/{E2E_SRC_ENV} so submit stages the checkout itself, then rerun",
        details={"uri": d.uri, "marker": verdict.value, "origin": d.origin.value},
    )


def _refusal(
    chosen: decision.SourceDecision,
    states: tuple[str, ...],
    root: Path | None,
    scanned: tree.SourceTree | None,
    env: Mapping[str, str],
    stack_name: str | None = None,
) -> ConfigError:
    shown = ", ".join(states[:5]) + (f" and {len(states) - 5} more" if len(states) > 5 else "")
    need = f"step(s) {shown} need NPA source (no image, or config.source_overlay)"
    export = f"export {SRC_ENV}=s3://… (`npa workbench workflow stage-src` prints it)"
    checked = f"checked {SRC_ENV}, {E2E_SRC_ENV} and {npa_config.config_path(env)}"
    if chosen.reason is SourceReason.STACK_OUTDATED:
        current = scanned.fingerprint if scanned else "unknown"
        message = (
            f"{need}; stack {stack_name}'s staged source {chosen.uri} is older than the "
            f"checkout {root} (which now fingerprints {current})"
        )
        remedy = (
            f"npa stack up --stack {stack_name} --yes stages this checkout as the stack's "
            "source; or pass --stage-src to stage it for this run only"
        )
    elif chosen.reason is SourceReason.NO_STAGE_OUTDATED:
        current = scanned.fingerprint if scanned else "unknown"
        message = (
            f"{need}; the saved source {chosen.uri} is outdated (the checkout now "
            f"fingerprints {current}) and --no-stage-src forbids restaging"
        )
        remedy = f"drop --no-stage-src to restage, or {export} to run older source on purpose"
    elif chosen.reason is SourceReason.NO_STAGE_MISSING:
        message = f"{need}, and --no-stage-src forbids staging it; {checked}: none is set"
        remedy = f"{export}, or drop --no-stage-src"
    elif chosen.reason is SourceReason.NO_CHECKOUT:
        message = (
            f"{need}, but there is no checkout to stage: npa-infra is not installed "
            f"editable and no source directory was given; {checked}: none is set"
        )
        remedy = f"pass --source DIR, or {export}"
    else:
        message = (
            f"{need}, staged from {root}, but no bucket is known: checked the stack's "
            "npa-infra:bucket and the spec's config.bucket (a placeholder does not count)"
        )
        remedy = f"pass --stack NAME whose stack file sets npa-infra:bucket, or --var bucket=B, or {export}"
    return ConfigError(
        message,
        remedy=remedy,
        details={"reason": chosen.reason.value, "states": list(states)},
    )


def _connect_in_background(store: ObjectStore) -> None:
    """Overlap building a boto3 client with the scan (the reuse budget is 1 s, issue 7)."""
    from npa_infra.storage.s3 import BotoStore

    if isinstance(store, BotoStore):
        threading.Thread(target=store.connect, name="npa-s3-connect", daemon=True).start()


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)
