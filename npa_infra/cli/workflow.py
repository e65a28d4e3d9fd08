"""``npa workbench workflow …``: validate-spec, plan-spec, submit, gpus.

Each command parses its options, calls one function of
``npa_infra.workflow.api`` and renders the result. The SDK is imported inside
the command bodies so ``npa --help`` stays fast.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from npa_infra.cli import gpus, output

if TYPE_CHECKING:
    from npa_infra.workflow.api import PlanReport
    from npa_infra.workflow.submission import SubmitReport

__all__ = ["app"]

app = typer.Typer(
    help="Validate, plan and submit npa.workflow specs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

app.command("gpus")(gpus.gpus_cmd)

SpecArg = Annotated[Path, typer.Argument(help="Path to an npa.workflow spec.", show_default=False)]
VarOpt = Annotated[
    list[str] | None, typer.Option("--var", help="Config override KEY=VALUE (repeatable).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
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
    spec: SpecArg, var: VarOpt = None, catalog: CatalogOpt = None, as_json: JsonOpt = False
) -> None:
    """Validate a spec; report every problem with file:line:col and a hint."""
    from npa_infra.workflow import api, options

    with _guard(as_json):
        report = api.validate_spec(
            spec, variables=options.parse_vars(var or []), catalog_path=catalog
        )
    if as_json:
        output.emit_json(report.to_json())
        return
    output.warn_spec(report.warnings, str(spec), placeholder_bucket=report.bucket_is_placeholder)
    output.out(f"valid: {report.name} ({report.api_version})")
    output.out(f"states: {', '.join(report.states)}")


def _print_plan(report: "PlanReport") -> None:
    plan = report.plan
    output.out(f"workflow: {plan.workflow}")
    if plan.assume_decision:
        output.out(f"assume_decision: {plan.assume_decision}")
    if report.waves is not None:
        output.out(f"waves: {len(report.waves)}")
        for w in report.waves:
            names = ", ".join(s.task_name for s in w.steps)
            extra = (
                f" maxConcurrency={w.max_concurrency} batches={w.batches}"
                if w.kind == "parallel"
                else ""
            )
            output.out(f"{w.index:02d}. [{w.kind}] {w.name}: {names}{extra}")
    else:
        for i, step in enumerate(plan.steps, start=1):
            output.out(
                f"{i:02d}. {step.task_name.replace(f'-{step.iteration}', f'#{step.iteration}') if step.iteration else step.state} {step.summary()}"
            )
    output.out(f"fingerprint: {report.fingerprint}")


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
    as_json: JsonOpt = False,
) -> None:
    """Plan a spec: the flat steps (or waves) under an assumed decision."""
    from npa_infra.workflow import api, options

    with _guard(as_json):
        report = api.plan_spec(
            spec,
            run_id=run_id,
            assume_decision=options.check_assumption(assume_decision),
            variables=options.parse_vars(var or []),
            with_waves=waves,
            max_concurrency=max_concurrency,
            catalog_path=catalog,
        )
    if as_json:
        output.emit_json(report.to_json())
        return
    output.warn_spec(report.warnings, str(spec), placeholder_bucket=report.bucket_is_placeholder)
    _print_plan(report)


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
    output.out("not submitted (--plan-only): nothing was launched")


@app.command("submit")
def submit(
    spec: Annotated[Path, typer.Argument(help="An npa.workflow spec or a raw SkyPilot task YAML.")],
    run_id: Annotated[str | None, typer.Option("--run-id", help="Explicit run id.")] = None,
    resume_run: Annotated[
        str | None, typer.Option("--resume-run", help="Re-enter an existing run.")
    ] = None,
    plan_only: Annotated[
        bool, typer.Option("--plan-only", help="Plan and render; launch nothing.")
    ] = False,
    runtime: Annotated[bool, typer.Option("--runtime", help="One managed job per wave.")] = False,
    var: VarOpt = None,
    assume_decision: AssumeOpt = None,
    image: Annotated[
        str | None, typer.Option("--image", help="Image for all steps (none = no image).")
    ] = None,
    image_override: Annotated[
        list[str] | None,
        typer.Option(
            "--image-override", "--tool-image", help="TOOL_REF=IMAGE, exact or prefix (repeatable)."
        ),
    ] = None,
    registry: Annotated[
        str | None, typer.Option("--registry", help="Registry for catalog images.")
    ] = None,
    infra: Annotated[str | None, typer.Option("--infra", help="k8s/<exact context>.")] = None,
    secret_env: Annotated[
        list[str] | None,
        typer.Option(
            "--secret-env",
            help="Environment variable NAME passed as a SkyPilot secret (repeatable).",
        ),
    ] = None,
    stack: Annotated[
        str | None, typer.Option("--stack", "-p", "--project", help="Stack name.")
    ] = None,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", min=0)] = 0,
    no_accept_eula: Annotated[
        bool, typer.Option("--no-accept-eula", help="Clear ACCEPT_EULA=Y.")
    ] = False,
    no_resolve_accelerators: Annotated[
        bool,
        typer.Option(
            "--no-resolve-accelerators",
            help="Submit the spec's GPU names verbatim (skip the cluster's GPU catalog).",
        ),
    ] = False,
    render_dir: Annotated[
        Path | None, typer.Option("--render-dir", help="Where rendered YAML is written.")
    ] = None,
    catalog: CatalogOpt = None,
    output_format: Annotated[
        str | None, typer.Option("--output-format", help="text | json")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Plan, render and (with the launch transaction) submit a workflow."""
    from npa_infra.errors import UsageError
    from npa_infra.workflow import options, submission

    json_out = as_json or (output_format or "").lower() == "json"
    failure = {"status": "FAILED", "run_id": resume_run or run_id, "launch_transaction": None}
    with _guard(json_out, failure):
        if output_format and output_format.lower() not in ("text", "json"):
            raise UsageError(
                f"invalid --output-format {output_format!r}", remedy="use text or json"
            )
        opts = submission.SubmitOptions(
            run_id=run_id,
            resume_run=resume_run,
            plan_only=plan_only,
            runtime=runtime,
            variables=options.parse_vars(var or []),
            assume_decision=options.check_assumption(assume_decision),
            image=image,
            image_overrides=options.parse_overrides(image_override or []),
            registry=registry,
            infra=infra,
            secret_env=options.parse_secret_names(secret_env or []),
            stack=stack,
            max_concurrency=max_concurrency,
            accept_eula=not no_accept_eula,
            render_dir=render_dir,
            catalog_path=catalog,
            resolve_accelerators=not no_resolve_accelerators,
        )
        report = submission.submit(spec, opts)
    if json_out:
        output.emit_json(report.to_json())
        return
    output.warn_spec([], str(spec), placeholder_bucket=report.bucket_is_placeholder)
    _print_submit(report)
