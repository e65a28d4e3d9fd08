"""``submit``: plan, render and write the SkyPilot YAML of a spec or raw task.

``--plan-only`` writes the YAML under the npa home, records the run id as a
plan in the journal (``planrecord``) and launches nothing. A
live submit checks its inputs (secrets, decisions, GPU requests) and hands
the rendered jobs to ``runner.execute``: the journaled, locked launch
transaction.

With an exact ``--infra k8s/<ctx>``, GPU requests are resolved against that
context's GPU catalog before rendering (``accelerators.resolve_for_plan``):
each step is rendered with the name SkyPilot matches there, and a request
the cluster cannot satisfy fails here, locally. The fingerprint and the
``plan`` in the JSON stay those of the spec; the remap is reported under
``accelerators``.

Image preflight (cli.md §1.3, §1.4) runs after planning and before
rendering, for a live submit and for ``--plan-only`` alike (the manifest
checks are read-only), unless ``preflight_images`` is off. It checks every
control-flow-reachable image; the renderer then pins each resolved image as
``<registry>/<repo>@sha256:…``. Then the in-cluster pull probe proves each
Kubernetes image on the exact context the submit launches on (``imagegate``,
kubernetes.md §9). A live submit launches only when every image is ``ok``:
anything else raises ``PreflightError`` before ``runner.execute``, so a missing
image release, or one the cluster cannot pull, costs no job launch.
``--plan-only`` creates no probe pod (its Kubernetes rows are
``target_pull_unverified``), reports the rows under ``preflight`` and exits 1
on a definite failure.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_infra import config as npa_config
from npa_infra import regularfile
from npa_infra.errors import SpecError, UsageError
from npa_infra.localstate import marker
from npa_infra.plan import context, waves
from npa_infra.plan.model import Plan, PlanError
from npa_infra.render import documents, images, raw
from npa_infra.render.tasks import RenderSettings, secret_names_for_image
from npa_infra.runs.lifecycle import RunStatus
from npa_infra.spec import source as spec_source
from npa_infra.spec.issues import SpecIssue, issue_json
from npa_infra.spec.model import ExecutionMode
from npa_infra.workflow.planning import accelerators, api, identity, imagecheck, loading
from npa_infra.workflow.planning.fingerprint import plan_fingerprint, run_fingerprint
from npa_infra.workflow.submission import imagegate, planners, planrecord, sourcing, submitflags
from npa_infra.workflow.submission.submitflags import SubmitOptions
from npa_infra.workflow.target import credentials, stackbinding, stackfile
from npa_infra.workflow.target.services import Services

if TYPE_CHECKING:
    # The live path (launch transaction, supervision) is imported where a live submit
    # starts it: --plan-only never loads it (issue 19).
    from npa_infra.workflow.execution import liverun

__all__ = ["SubmitReport", "submit"]


SKIPPED_PREFLIGHT: dict[str, Any] = {
    "decision": "skipped",
    "checks": [],
    "reason": "--no-preflight-images",
}


@dataclass(frozen=True, slots=True)
class SubmitReport:
    run_id: str
    workflow: str
    mode: str
    plan: Plan | None
    fingerprint: str
    jobs: list[documents.RenderedJob]
    yaml_paths: list[str]
    secret_env_hints: list[dict[str, Any]]
    source: dict[str, Any]
    infrastructure: dict[str, Any]
    bucket_is_placeholder: bool = False
    accelerators: accelerators.AcceleratorOutcome | None = None
    preflight: dict[str, Any] = field(default_factory=lambda: dict(SKIPPED_PREFLIGHT))
    warnings: list[SpecIssue] = field(default_factory=list)  # the spec's (issue 18)
    exit_code: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "status": RunStatus.PLANNED,
            "bucket_is_placeholder": self.bucket_is_placeholder,
            "lifecycle_state": "PLAN_ONLY",
            "submission_state": "NOT_SUBMITTED",
            "submission_receipt": None,
            "run_id": self.run_id,
            "workflow": self.workflow,
            "mode": self.mode,
            "steps": len(self.plan.steps)
            if self.plan
            else sum(len(j.documents) - 1 for j in self.jobs),
            "fingerprint": self.fingerprint,
            "secret_env_hints": self.secret_env_hints,
            "source": self.source,
            "preflight": self.preflight,
            "infrastructure": self.infrastructure,
            "accelerators": self.accelerators.to_json() if self.accelerators else [],
            "accelerator_resolution": self.accelerators.summary_json()
            if self.accelerators
            else {"status": "skipped", "reason": "raw SkyPilot task", "context": None},
            "plan": self.plan.to_json() if self.plan else None,
            "skypilot_yaml": [
                {
                    "job_name": j.job_name,
                    "wave": j.wave,
                    "execution": j.execution,
                    "path": p,
                    "tasks": len(j.documents) - 1,
                    "images": list(j.images),
                }
                for j, p in zip(self.jobs, self.yaml_paths, strict=True)
            ],
            "warnings": [issue_json(w) for w in self.warnings],  # issue 18: always present
        }


def _secret_hints(sources: Mapping[str, str | None]) -> list[dict[str, Any]]:
    return [{"name": n, "available": src is not None, "source": src} for n, src in sources.items()]


def _write(jobs: list[documents.RenderedJob], directory: Path) -> list[str]:
    # marked as npa's, so that npa cleanup --yes may remove it later (issue 24)
    marker.make_dir(directory, "rendered_yaml")
    paths = []
    for job in jobs:
        path = directory / f"{job.job_name}.yaml"
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(job.text, encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(path)
        paths.append(str(path))
    return paths


def submit(
    spec_path: Path,
    options: SubmitOptions,
    *,
    env: Mapping[str, str] | None = None,
    services: Services | None = None,
    planning: planners.Planning | None = None,
) -> SubmitReport | liverun.LiveResult:
    """Plan and render a spec (or raw SkyPilot YAML); launch it unless ``plan_only``.

    ``services`` are the adapters (``workflow.target.services``): ``gpu_cluster`` for
    accelerator resolution, ``registry`` and ``prober`` for image preflight,
    ``stack_engine`` for the stack's outputs, ``store`` for the staged source, the
    rest for the live run. ``planning``: the planner and renderer (the real ones by
    default); a runtime run plans and renders its route once per decision set
    (``reidentification.Routes``) and lists the ``--infra`` GPU catalog once.

    Raises:
        SpecError, UsageError, RenderError: the spec, the options or the rendering.
        PreflightError: a GPU request the ``--infra`` context cannot satisfy, or
            (live submits) an image preflight that is not ``ok`` for every image.
        KubeError: reading that context's GPU catalog failed.
        RunLockedError, RunStateError: the run is being submitted elsewhere, or the
            journal forbids it (unknown run, changed plan, existing run id).
    """
    environ = os.environ if env is None else env
    if options.run_id and options.resume_run:
        raise UsageError(
            "--run-id and --resume-run are mutually exclusive",
            remedy="use --resume-run ID to re-enter a run, or --run-id ID for a new one",
        )
    try:  # bounded, and never a FIFO or a device (faults.md: hostile input); else refused below
        text = regularfile.read(spec_path, spec_source.MAX_BYTES).decode("utf-8")
    except (regularfile.RefusedFile, OSError, UnicodeDecodeError):
        text = None
    if text is not None and not raw.is_workflow_spec(text):
        return _submit_raw(spec_path, text, options, environ, services)
    catalog = api.select(options.catalog_path, environ)
    v = loading.load_validated(spec_path, catalog, options.variables, strict=options.strict)
    spec = v.spec
    runtime = options.runtime or spec.metadata.execution_mode is ExecutionMode.RUNTIME
    if (
        spec.metadata.execution_mode is ExecutionMode.RUNTIME
        and options.assume_decision
        and not options.plan_only
    ):
        raise UsageError(
            f"workflow '{spec.name}' declares executionMode: runtime; --assume-decision is only for previews",
            remedy="drop --assume-decision (the evaluator's decisions route the run), or add --plan-only to preview",
        )
    if (
        not runtime
        and spec.has_transitions
        and not options.plan_only
        and not (options.assume_decision or spec.config.get("plan_assume_decision"))
    ):
        raise UsageError(
            f"workflow '{spec.name}' has dynamic transitions; pass --assume-decision "
            "promote_checkpoint|loop_back (or set config.plan_assume_decision)",
            remedy="or run it with --runtime so real decisions route it",
        )
    run_id = identity.check_run_id(
        options.resume_run or options.run_id or identity.fresh_run_id(spec.name)
    )
    names = list(options.secret_env)
    home = npa_config.npa_home(environ)
    project = _project(options, environ, services)
    sources = credentials.resolve_sources(
        names, environ, npa_home=home, stack=options.stack, project=project
    )
    if not options.plan_only:
        credentials.require(sources, npa_home=home, stack=options.stack, project=project)
    planning = planning or planners.Planning()
    try:
        plan = planning.build(spec, catalog, run_id=run_id, assume_decision=options.assume_decision)
    except PlanError as err:
        raise api.plan_error(v, err) from None
    given = services or Services()
    stack = _stack_settings(options, environ, services)
    stackbinding.context(options.infra, stack)  # never a cluster other than the stack's
    registry = imagecheck.catalog_registry(
        options.registry, stack, environ, project.release_namespace if project else None
    )
    catalogs = accelerators.Catalogs(environ, given)  # one node listing for the run
    gpu = accelerators.resolve_for_plan(
        plan,
        infra=options.infra,
        enabled=options.resolve_accelerators,
        env=environ,
        services=given,
        catalogs=catalogs,
    )
    selection = images.ImageSelection(tuple(options.image_overrides), options.image, registry)
    checked, image_pins = imagegate.check(
        v,
        catalog,
        run_id,
        selection,
        options,
        environ,
        stack=stack,
        services=given,
    )
    source = sourcing.plan_source(
        spec,
        plan,
        selection=selection,
        runtime=runtime,
        request=_source_request(options),
        env=environ,
        stack=stack,
    )
    src = source.uri
    settings = RenderSettings(
        workflow=spec.name,
        run_id=run_id,
        config=plan.config,
        selection=dataclasses.replace(selection, pins=image_pins),
        secret_env=tuple(names),
        src_s3_uri=src,
        accept_eula=options.accept_eula,
        gpu_accelerator=environ.get("NPA_WORKFLOW_GPU_ACCELERATOR", ""),
        gpu_memory=environ.get("NPA_WORKFLOW_GPU_MEMORY", ""),
    )
    jobs = planning.render(
        gpu.plan, settings, runtime=runtime, max_concurrency_cap=options.max_concurrency
    )
    if not options.plan_only:
        from npa_infra.workflow.execution import liverun
        from npa_infra.workflow.submission import reidentification
        from npa_infra.workflow.supervision import runner

        stackbinding.require_pull_secrets(jobs, stack)
        request = _live_request(
            spec_path,
            options,
            run_id=run_id,
            workflow=spec.name,
            mode="runtime" if runtime else "one-shot",
            fingerprint=run_fingerprint(plan, image_pins),
            jobs=jobs,
            stack=stack,
            image_pins=image_pins if checked is not None else None,
            project=project,
        )
        # The planned source action is journaled with the run; the staging itself runs
        # once the run is durable, before the first launch (runtime-reference.md §1, §6).
        request = dataclasses.replace(
            request,
            extra={**request.extra, "source": source.to_json(), **stackbinding.record(stack)},
            stage_source=lambda: sourcing.apply(source, env=environ, services=given),
        )
        if runtime:
            router = reidentification.Router(
                catalog, run_id, options, settings, environ, given, planning, catalogs
            )
            routes = reidentification.Routes(router, spec)

            def replan(decided: Mapping[str, str]) -> liverun.RoutedPlan:
                # dsl.md §5.4: real decisions route the run; the plan stops at the
                # first decision not read yet. Planned and rendered once per decision
                # set that changes the route (issue 19); the wave loop calls this once
                # per round and takes each wave's outputs and schemas from its answer.
                fresh = routes(decided)
                stackbinding.require_pull_secrets(fresh.jobs, stack)
                return liverun.RoutedPlan(
                    fresh.jobs,
                    fresh.routed.pending,
                    fresh.routed.decisions_used,
                    fresh.outputs(),
                    fresh.schemas(),
                )

            # a relaunch re-identifies the wave from the spec file as it is then (issue 9)
            reidentify = router.reidentifier(spec_path)
            request = dataclasses.replace(request, replan=replan, reidentify=reidentify)
        return runner.execute(request, environ, services)
    paths = _write(jobs, (options.render_dir or npa_config.npa_home(environ) / "rendered") / run_id)
    docker_secrets = sorted({n for j in jobs for i in j.images for n in secret_names_for_image(i)})
    sources.update(
        credentials.resolve_sources(
            docker_secrets, environ, npa_home=home, stack=options.stack, project=project
        )
    )
    report = SubmitReport(
        run_id=run_id,
        workflow=spec.name,
        mode="runtime" if runtime else "one-shot",
        plan=plan,
        fingerprint=plan_fingerprint(plan),
        jobs=jobs,
        yaml_paths=paths,
        secret_env_hints=_secret_hints(sources),
        source=source.to_json(),
        infrastructure=_infrastructure(options, stack, runtime),
        bucket_is_placeholder=context.bucket_is_placeholder(plan.config),
        accelerators=gpu,
        preflight=checked.summary_json() if checked is not None else dict(SKIPPED_PREFLIGHT),
        warnings=v.warnings,
        exit_code=1 if checked is not None and checked.exit_code == 1 else 0,
    )
    return planrecord.record(
        report, spec_path, env=environ, services=services, project=options.project
    )


def _infrastructure(
    options: SubmitOptions, stack: stackfile.StackSettings | None, runtime: bool
) -> dict[str, Any]:
    context_name = (
        options.infra.removeprefix("k8s/")
        if options.infra and options.infra.startswith("k8s/")
        else None
    )
    return {
        "infra": options.infra,
        "context": context_name or (stack.context if stack else None),
        "namespace": stack.namespace if stack else None,
        "stack": stack.name if stack else None,
        "stack_source": stack.source if stack else None,
        "execution": "runtime" if runtime else "one-shot",
    }


def _source_request(options: SubmitOptions) -> sourcing.SourceRequest:
    return sourcing.SourceRequest(
        stage_src=options.stage_src,
        no_stage_src=options.no_stage_src,
        source_root=options.source_root,
        stack_name=options.stack,
        resume_run=options.resume_run,
        plan_only=options.plan_only,
    )


def _project(
    options: SubmitOptions, env: Mapping[str, str], services: Services | None
) -> credentials.ProjectSecrets | None:
    """The selected project's credentials and release namespace (None: no project)."""
    return credentials.for_project(
        options.project,
        env,
        root=options.project_root,
        engine_factory=(services or Services()).stack_engine,
    )


def _stack_settings(
    options: SubmitOptions, env: Mapping[str, str], services: Services | None = None
) -> stackfile.StackSettings | None:
    """The stack's file; for a live submit overlaid with its outputs when the engine has them
    (pulumi.md: submit runs against what the stack declared, not ad-hoc flags)."""
    if not options.stack:
        return None
    if options.plan_only:
        return stackfile.read_stack(options.stack, options.project_root)
    return stackfile.resolve_stack(
        options.stack,
        options.project_root,
        env,
        engine_factory=(services or Services()).stack_engine,
    )


def _live_request(
    spec_path: Path,
    options: SubmitOptions,
    *,
    run_id: str,
    workflow: str,
    mode: str,
    fingerprint: str,
    jobs: list[documents.RenderedJob],
    stack: stackfile.StackSettings | None,
    image_pins: Mapping[str, str] | None = None,
    project: credentials.ProjectSecrets | None = None,
) -> liverun.LiveRequest:
    from npa_infra.workflow.execution import liverun

    preflight: dict[str, Any] = (
        {"decision": "passed", "pins": dict(image_pins)}
        if image_pins is not None
        else {"decision": "skipped"}
    )
    return liverun.LiveRequest(
        spec_path=spec_path,
        run_id=run_id,
        workflow=workflow,
        mode=mode,
        fingerprint=fingerprint,
        jobs=jobs,
        stack=stack,
        stack_name=options.stack,
        infra=options.infra,
        secret_names=list(options.secret_env),
        resume=bool(options.resume_run),
        invocation=submitflags.resume_argv(spec_path, options, run_id),
        sky_bin=options.sky_bin,
        isolated_config_dir=options.isolated_config_dir,
        project=project,
        extra={
            # whose run it is: `-p ALIAS` scopes by this, never by a shared context (issue 24)
            "project": options.project,
            "poll": {"interval": options.poll_seconds, "max_wait": options.max_wait_seconds},
            "retries": options.retries,
            "max_infrastructure_recoveries": options.max_infrastructure_recoveries,
            "infrastructure_grace": options.infrastructure_grace_seconds,
            "permanent_grace": options.permanent_blocker_grace_seconds,
            "heartbeat_seconds": options.heartbeat_seconds,
            "stale_after_seconds": options.stale_after_seconds,
            "image_preflight": preflight,
        },
    )


def _fingerprint_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _submit_raw(
    spec_path: Path,
    text: str,
    options: SubmitOptions,
    env: Mapping[str, str],
    services: Services | None = None,
) -> SubmitReport | liverun.LiveResult:
    docs, issues = raw.load_raw_task(text, str(spec_path), options.variables)
    if issues:
        raise SpecError(issues, source=str(spec_path))
    name = str(docs[0].get("name") or spec_path.stem)
    run_id = identity.check_run_id(
        options.resume_run or options.run_id or identity.fresh_run_id(name)
    )
    names = list(options.secret_env)
    home = npa_config.npa_home(env)
    project = _project(options, env, services)
    sources = credentials.resolve_sources(
        names, env, npa_home=home, stack=options.stack, project=project
    )
    if not options.plan_only:
        credentials.require(sources, npa_home=home, stack=options.stack, project=project)
    job = documents.RenderedJob(
        waves.job_name(run_id),
        None,
        "serial",
        tuple(docs),
        (),
        documents.dump_documents(tuple(docs)),
    )
    if not options.plan_only:
        from npa_infra.workflow.supervision import runner

        stack = stackfile.read_stack(options.stack, options.project_root) if options.stack else None
        return runner.execute(
            _live_request(
                spec_path,
                options,
                run_id=run_id,
                workflow=name,
                mode="raw",
                fingerprint=_fingerprint_text(job.text),
                jobs=[job],
                stack=stack,
                project=project,
            ),
            env,
            services,
        )
    paths = _write([job], (options.render_dir or npa_config.npa_home(env) / "rendered") / run_id)
    report = SubmitReport(
        run_id,
        name,
        "raw",
        None,
        "",
        [job],
        paths,
        _secret_hints(sources),
        {"status": "not_required", "uri": None},
        _infrastructure(options, None, False),
        preflight={
            "decision": "skipped",
            "checks": [],
            "reason": "raw SkyPilot task: images are not resolved by npa-infra",
        },
    )
    return planrecord.record(report, spec_path, env=env, services=services, project=options.project)
