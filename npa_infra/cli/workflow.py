"""``npa workbench workflow …``: validate-spec, plan-spec, preflight-images, submit, stage-src, gpus.

Each command parses its options, calls one function of
``npa_infra.workflow.planning.api`` and renders the result. The SDK is imported inside
the command bodies so ``npa --help`` stays fast.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from npa_infra.cli import (
    flags,
    gpus,
    optiontypes,
    output,
    runhistory,
    selection,
    services,
    source,
    specformat,
)

if TYPE_CHECKING:
    from npa_infra.registry.models import CheckResult
    from npa_infra.workflow.execution.liverun import LiveResult
    from npa_infra.workflow.operations.runstatus import AllStatusReport, StatusReport
    from npa_infra.workflow.planning.api import PlanReport
    from npa_infra.workflow.submission.pipeline import SubmitReport

__all__ = ["app"]

app = typer.Typer(
    help="Validate, plan and submit npa.workflow specs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

app.command("gpus")(gpus.gpus_cmd)
app.command("stage-src")(source.stage_src_cmd)
app.command("logs")(runhistory.logs_cmd)
app.command("list")(runhistory.list_cmd)
app.command("schema")(specformat.schema_cmd)
app.command("catalog")(specformat.catalog_cmd)

SpecArg = Annotated[
    Path,
    typer.Argument(
        help="Path to an npa.workflow spec.", parser=optiontypes.path, show_default=False
    ),
]
VarOpt = Annotated[
    list[str] | None, typer.Option("--var", help="Config override KEY=VALUE (repeatable).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
StrictOpt = Annotated[
    bool, typer.Option("--strict", help="A --var the spec never reads is an error.")
]
CatalogOpt = Annotated[
    Path | None, typer.Option("--catalog", help="Tool catalog JSON (else NPA_TOOL_CATALOG).")
]
AssumeOpt = Annotated[
    str | None,
    typer.Option(
        "--assume-decision",
        help="promote_checkpoint | promote | loop_back | loop_back_to_inner_loop",
    ),
]
ImageOpt = Annotated[
    str | None, typer.Option("--image", help="Image for all steps (none = no image).")
]
ImageOverrideOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--image-override", "--tool-image", help="TOOL_REF=IMAGE, exact or prefix (repeatable)."
    ),
]
RegistryOpt = Annotated[str | None, typer.Option("--registry", help="Registry for catalog images.")]
BootstrapTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--image-bootstrap-timeout-seconds",
        parser=optiontypes.seconds,
        help="How long the pull-probe pod is watched (0 = no deadline).",
    ),
]
InsecureOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--insecure-registry",
        help="HOST that may be contacted over plain HTTP (loopback always may; repeatable).",
    ),
]


@contextmanager
def _guard(as_json: bool, extra: dict[str, Any] | None = None) -> Iterator[None]:
    """Turn an ``NpaError`` raised inside the block into output and an exit code."""
    from npa_infra.errors import NpaError

    try:
        yield
    except NpaError as exc:
        payload = dict(extra or {})
        if "run_id" in payload and exc.details.get("run_id"):
            payload["run_id"] = exc.details["run_id"]
        output.fail(exc, as_json=as_json, extra=payload)


@app.command("validate-spec")
def validate_spec(
    spec: SpecArg,
    var: VarOpt = None,
    catalog: CatalogOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate a spec; report every problem with file:line:col and a hint."""
    from npa_infra.workflow.planning import api, options

    with _guard(as_json):
        report = api.validate_spec(
            spec, variables=options.parse_vars(var or []), catalog_path=catalog, strict=strict
        )
    if as_json:
        output.emit_json(report.to_json())
        return
    output.warn_spec(report.warnings, str(spec), placeholder_bucket=report.bucket_is_placeholder)
    output.out(f"valid: {report.name} ({report.api_version})")
    output.out(f"states: {', '.join(report.states)}")


class PlanFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    MERMAID = "mermaid"
    DOT = "dot"


FormatOpt = Annotated[
    PlanFormat,
    typer.Option(
        "--format",
        help="text | json (= --json) | mermaid | dot: a drawing of the state machine "
        "(with --json, wrapped as {status, format, graph}).",
    ),
]


def _print_plan(report: "PlanReport", fmt: PlanFormat, as_json: bool) -> None:
    drawing = fmt in (PlanFormat.MERMAID, PlanFormat.DOT)
    if as_json:
        output.emit_json(report.drawing_json(fmt.value) if drawing else report.to_json())
        return
    for line in report.drawing(fmt.value).splitlines() if drawing else report.text_lines():
        output.out(line)


@app.command("plan-spec")
def plan_spec(
    spec: SpecArg,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run id (default <name>-plan).")
    ] = None,
    assume_decision: AssumeOpt = None,
    var: VarOpt = None,
    waves: Annotated[bool, typer.Option("--waves", help="Group steps into launch waves.")] = False,
    max_concurrency: Annotated[
        int, typer.Option("--max-concurrency", min=0, help="Batch cap (0 = none).")
    ] = 0,
    catalog: CatalogOpt = None,
    fmt: FormatOpt = PlanFormat.TEXT,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Plan a spec: the flat steps (or waves) under an assumed decision, or draw it."""
    from npa_infra.workflow.planning import api, options

    as_json = as_json or fmt is PlanFormat.JSON
    with _guard(as_json):
        report = api.plan_spec(
            spec,
            run_id=run_id,
            assume_decision=options.check_assumption(assume_decision),
            variables=options.parse_vars(var or []),
            with_waves=waves,
            max_concurrency=max_concurrency,
            catalog_path=catalog,
            with_graph=fmt in (PlanFormat.MERMAID, PlanFormat.DOT),
            strict=strict,
        )
    if not as_json:
        output.warn_spec(
            report.warnings, str(spec), placeholder_bucket=report.bucket_is_placeholder
        )
    _print_plan(report, fmt, as_json)


def _print_checks(rows: "list[CheckResult] | tuple[CheckResult, ...]") -> None:
    """One line per image: status, image, digest (and platform digest), then the remedy."""
    for row in rows:
        digest = row.digest or "-"
        if row.platform_digest:
            digest += f" (platform {row.platform_digest})"
        line = f"{row.status.value:<16} {row.image}  {digest}"
        if row.probe is not None and row.status == "ok":
            line += f"  (pulled in-cluster by {row.probe.pod or 'a cached probe'})"
        if row.status != "ok":
            line += f"  {row.detail}; next: {row.remedy}"
        output.out(line)


@app.command("preflight-images")
def preflight_images(
    ctx: typer.Context,
    spec: SpecArg,
    var: VarOpt = None,
    assume_decision: AssumeOpt = None,
    image: ImageOpt = None,
    image_override: ImageOverrideOpt = None,
    registry: RegistryOpt = None,
    insecure_registry: InsecureOpt = None,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    catalog: CatalogOpt = None,
    infra: Annotated[
        str | None,
        typer.Option("--infra", help="k8s/<exact context>: prove each pull with a probe pod."),
    ] = None,
    image_bootstrap_timeout_seconds: BootstrapTimeoutOpt = 1800.0,
    as_json: JsonOpt = False,
) -> None:
    """Check every image the spec can run (all decision outcomes) against its registry,
    then, with --infra k8s/<context>, pull each Kubernetes image in-cluster with a probe pod.

    Exit codes: 0 every image ok; 1 a definite failure (forbidden, unauthorized,
    not_found, invalid, no_credentials, untrusted_realm, probe_incompatible); 2
    only unproven results (unreachable, error, target_pull_unverified,
    probe_indeterminate).
    """
    from npa_infra.workflow.planning import api, options

    chosen = selection.select(stack, project, as_json=as_json, context=selection.given(infra))
    with _guard(as_json):
        report = api.preflight_images(
            spec,
            variables=options.parse_vars(var or []),
            assume_decision=options.check_assumption(assume_decision),
            image=image,
            image_overrides=options.parse_overrides(image_override or []),
            registry=registry,
            insecure_registries=list(insecure_registry or []),
            stack=chosen.stack,
            catalog_path=catalog,
            infra=chosen.infra(infra),
            image_bootstrap_timeout_seconds=image_bootstrap_timeout_seconds,
            services=services.build(ctx.obj),
            project=chosen.project,
        )
    if as_json:
        output.emit_json(report.to_json())
    else:
        _print_checks(report.rows)
        output.out(f"preflight: {report.decision} ({len(report.rows)} image(s), {report.platform})")
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _print_submit(report: "SubmitReport") -> None:
    output.out(f"run: {report.run_id}  workflow: {report.workflow}  mode: {report.mode}")
    if report.plan is not None:
        if report.plan.assume_decision:
            output.out(f"assume_decision: {report.plan.assume_decision}")
        output.out(f"steps: {len(report.plan.steps)}  fingerprint: {report.fingerprint}")
    number = 0
    for job, path in zip(report.jobs, report.yaml_paths, strict=True):
        tasks = [d for d in job.documents if "execution" not in d]
        output.out(f"job {job.job_name} [{job.execution}], {len(tasks)} task(s) -> {path}")
        for task in tasks:
            number += 1
            image = str((task.get("resources") or {}).get("image_id", "")).removeprefix("docker:")
            output.out(
                f"  {number:02d}. {task.get('name')}  {image or '(no image: staged source)'}"
            )
    gpu = report.accelerators
    if gpu is not None and gpu.status == "resolved":
        for item in gpu.steps:
            res = item.resolution
            target = f" -> {res.resolved}" if res.resolved != res.requested else ""
            output.out(f"accelerator {item.state}: {res.requested}{target} ({res.display()})")
        output.out(f"accelerators: {gpu.reason}")
    elif gpu is not None and gpu.context:
        output.out(f"accelerators: not resolved ({gpu.reason})")
    for hint in report.secret_env_hints:
        state = "set" if hint["available"] else "NOT SET"
        output.out(f"secret {hint['name']}: {state} (passed by name at launch, never written)")
    _print_preflight(report.preflight)
    source.print_plan(report.source)
    output.out("not submitted (--plan-only): nothing was launched")


def _print_preflight(preflight: dict[str, Any]) -> None:
    rows = preflight.get("checks", [])
    if rows:  # the pydantic rows only when there are any (a skipped preflight has none)
        from npa_infra.registry.models import CheckResult

        _print_checks([CheckResult.model_validate(row) for row in rows])
    reason = f" ({preflight['reason']})" if preflight.get("reason") else ""
    output.out(f"image preflight: {preflight.get('decision')}{reason}")


def _submit_outputs(
    resume_alias: Annotated[
        bool, typer.Option("--resume", hidden=True, help="Accepted; implied by --resume-run.")
    ] = False,
    output_format: Annotated[
        str | None, typer.Option("--output-format", help="text | json")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """submit's invocation flags: how it prints, never options of the run themselves. The
    -p/--project that names its target is resolved here into the run's own
    --stack/--infra/--isolated-config-dir, which its resume command carries with the alias."""


@app.command("submit")
@flags.submit_options(outputs=_submit_outputs)
def submit(
    ctx: typer.Context,
    spec: Annotated[
        Path,
        typer.Argument(
            help="An npa.workflow spec or a raw SkyPilot task YAML.", parser=optiontypes.path
        ),
    ],
    **values: Any,
) -> None:
    """Plan, render and submit a workflow through the journaled launch transaction.

    Exit codes: 0 submitted and reconciled, or adopted (runtime: the run
    succeeded); 1 a definite failure (validation, preflight, verified-absent
    launch failure, a failed run, another submit holds the run); 2 the launch
    may or may not exist: rerun the identical command with --resume-run RUN
    (printed), never a new id and never a cancel by name; 130 interrupted
    after the checkpoint was written.
    """
    # The options are workflow.submission.submitflags' table (cli/flags.py builds the signature).
    from npa_infra.errors import UsageError
    from npa_infra.workflow.submission import pipeline, submitflags

    output_format: str | None = values.pop("output_format")
    json_out = values.pop("as_json") or (output_format or "").lower() == "json"
    values.pop("resume_alias")  # --resume is implied by --resume-run
    run = values["resume_run"] or values["run_id"]
    failure = {"status": "FAILED", "run_id": run, "launch_transaction": None}
    chosen = selection.select(
        values["stack"],
        values["project"],
        as_json=json_out,
        context=selection.given(values["infra"]),
        extra=failure,
    )
    values["stack"], values["infra"] = chosen.stack, chosen.infra(values["infra"])
    if values["isolated_config_dir"] is None:
        values["isolated_config_dir"] = chosen.state_dir
    with _guard(json_out, failure):
        if output_format and output_format.lower() not in ("text", "json"):
            raise UsageError(
                f"invalid --output-format {output_format!r}", remedy="use text or json"
            )
        opts = submitflags.SubmitOptions(**submitflags.fields_from_cli(values))
        given = services.build(ctx.obj, progress=None if json_out else output.warn)
        report = pipeline.submit(spec, opts, services=given)
    if not isinstance(report, pipeline.SubmitReport):
        _finish_live(report, json_out)
        return
    if json_out:
        output.emit_json(report.to_json())
    else:
        output.warn_spec(
            report.warnings, str(spec), placeholder_bucket=report.bucket_is_placeholder
        )
        _print_submit(report)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _finish_live(result: "LiveResult", json_out: bool) -> None:
    if json_out:
        output.emit_json(result.to_json())
    else:
        output.out(f"run: {result.run_id}  workflow: {result.workflow}  mode: {result.mode}")
        for tx in result.transactions:
            output.out(
                f"job {tx['job_name']}: {tx['state']} ({tx['recovery_decision'] or '-'}), "
                f"job id {tx['job_id'] if tx['job_id'] is not None else '-'}, "
                f"launch sequence {tx['launch_sequence']}"
            )
        output.out(f"status: {result.status}")
        for path in result.launch_logs:  # SkyPilot's whole launch output (launchlog)
            output.out(f"launch log: {path}")
        if result.error is not None:
            output.warn(f"Error: {result.error.message}")
            if result.error.remedy:
                output.warn(f"Hint: {result.error.remedy}")
    if result.exit_code:
        raise typer.Exit(result.exit_code)


RunIdArg = Annotated[
    str, typer.Argument(help="The run id.", parser=optiontypes.text, show_default=False)
]


@app.command("status")
def status(
    ctx: typer.Context,
    run_id: Annotated[
        str | None,
        typer.Argument(help="The run id (or --all).", parser=optiontypes.text, show_default=False),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Every run of the journal that is not terminal.")
    ] = False,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    cached: Annotated[
        bool, typer.Option("--cached", help="Journal only: no SkyPilot or cluster calls.")
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Refresh until no listed run is in progress (with --json: print only the last).",
        ),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            parser=optiontypes.finite_at_least(1.0),
            help="Seconds between --watch refreshes.",
        ),
    ] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Show a run (or --all runs): waves, attempts, job ids, SkyPilot status, budgets, blockers.

    With -s/--stack or -p/--project only that selection's runs are shown (a run
    of another is NOT_FOUND).

    With --watch the view is printed once per refresh until nothing is in
    progress; with --watch --json only the last refresh's document is printed
    (one JSON document, as every --json). Exit codes (of the last refresh): 0
    succeeded, in progress, ROLLED_BACK or PLANNED; 1 NOT_FOUND, ABSENT,
    FAILED* or CANCELLED; 2 not proven: RECOVERY_REQUIRED (the remedy is the
    --resume-run command), VERIFICATION_UNAVAILABLE, PARTIAL or DEGRADED; 64 a
    usage error (neither or both of RUN_ID and --all).
    With --all: the worst of the runs' codes, 1 before 2, 0.
    """
    import os

    from npa_infra.errors import UsageError
    from npa_infra.workflow.operations import runstatus

    if (run_id is None) == (not all_runs):
        output.fail(UsageError("give exactly one of RUN_ID or --all"), as_json=as_json)
    chosen = selection.select(stack, project, as_json=as_json, extra={"run_id": run_id})
    # what an embedding caller (or a test) put there; text mode says what a call waits for
    given = services.build(ctx.obj, waits=None if as_json else output.warn)
    with _guard(as_json, {"run_id": run_id}):
        for number, report in enumerate(
            runstatus.refreshes(
                None if all_runs else run_id,
                env=os.environ,
                stack=chosen.stack,
                cached=cached,
                interval=interval,
                services=given,
                scope=chosen,
            )
        ):
            if not as_json:
                _print_report(report, first=number == 0)
            if not watch:
                break
    if as_json:
        output.emit_json(report.to_json())
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _print_report(report: "StatusReport | AllStatusReport", *, first: bool) -> None:
    from npa_infra.workflow.operations import runstatus

    if not first:
        output.out()  # one blank line between the frames of --watch
    if isinstance(report, runstatus.AllStatusReport):
        _print_all(report.runs)
    else:
        _print_status(report)
    if first:  # the drift gate's warnings, on stderr once per command
        runs = report.runs if isinstance(report, runstatus.AllStatusReport) else [report]
        for w in {w["message"]: w for r in runs for w in r.warnings}.values():
            output.warn(f"Warning: {w['message']}. Hint: {w['remedy']}")


def _print_status(report: Any) -> None:
    output.out(f"run: {report.run_id}  workflow: {report.workflow or '-'}  status: {report.status}")
    for wave in report.waves:
        output.out(
            f"  wave {wave['wave']:02d} attempt {wave['attempt']}: {wave['job_name']} "
            f"job {wave['job_id'] if wave['job_id'] is not None else '-'} "
            f"{wave['sky_status'] or wave['status']}"
        )
        for blocker in wave["blockers"]:
            output.out(
                f"    blocker {blocker.get('code')}: {blocker.get('message') or blocker.get('evidence') or ''}"
            )
    if report.detail:
        output.out(f"detail: {report.detail}")
    if report.remedy:
        output.out(f"next: {report.remedy}")


def _print_all(runs: list[Any]) -> None:
    output.out("RUN  WAVE  ATTEMPT  JOB  SKY_STATUS  BLOCKER")
    for report in runs:
        rows = report.waves or [{"wave": None, "attempt": None, "job_id": None, "blockers": []}]
        for wave in rows:
            found = wave["blockers"][0] if wave["blockers"] else {}
            blocker = "/".join(
                str(found.get(k)) for k in ("code", "class", "reason") if found.get(k)
            )
            output.out(
                f"{report.run_id}  {_dash(wave['wave'])}  {_dash(wave['attempt'])}  "
                f"{_dash(wave['job_id'])}  {wave.get('sky_status') or report.status}  "
                f"{blocker or '-'}"
            )
    if not runs:
        output.out("no run in progress")


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    run_id: RunIdArg,
    stack: selection.StackOpt = None,
    project: selection.ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Cancel every non-terminal job of a run by exact id, and wait until each is terminal.

    With -s/--stack or -p/--project, a run that is not of that selection is
    unknown_run and nothing is touched.

    Exit codes: 0 not_submitted, already_absent or cancelled; 1 unknown_run;
    2 partial_cancellation or verification_failed.
    """
    import os

    from npa_infra.workflow.operations import cancellation

    chosen = selection.select(stack, project, as_json=as_json, extra={"run_id": run_id})
    with _guard(as_json, {"run_id": run_id}):
        given = services.build(ctx.obj, waits=None if as_json else output.warn)
        report = cancellation.cancel_run(run_id, env=os.environ, services=given, scope=chosen)
    if as_json:
        output.emit_json(report.to_json())
    else:
        output.out(f"run: {report.run_id}  outcome: {report.outcome}")
        if report.cancelled_job_ids:
            output.out(f"cancelled: {', '.join(map(str, report.cancelled_job_ids))}")
        if report.remaining_job_ids:
            output.out(f"still active: {', '.join(map(str, report.remaining_job_ids))}")
        for error in report.errors:
            output.warn(f"error: {error}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)
