"""The options of ``submit`` as data: one table the CLI, the SDK and the resume command share.

``SubmitOptions`` is the one typed options object. Each ``Flag`` names one of
its fields, its command-line spelling, its kind, its default and its help
text. From the table come
``npa workbench workflow submit``'s typer signature (``npa_infra.cli.flags``),
the conversion of the parsed flags into ``SubmitOptions`` (``fields_from_cli``)
and the resume command of a run (``resume_argv``): issue 15's "options exist
once". A test holds the table, the dataclass and the typer command to one
another, so a flag cannot be added in one place only.

What the resume command carries (``Resume``): every option that affects the
run, when it differs from its default, in table order. ``--run-id`` is
replaced by ``--resume-run RUN``. The output flags (``--json``,
``--output-format``) are not options of the run but of one invocation's
presentation; they live in the CLI only, and a resume chooses its own.
``project_root`` has no flag: the CLI's is always the working directory, so
the resume command is to be run from the project root, as the first one was.

The command is exact for every value the CLI can express. The SDK accepts a
few it cannot (a ``--var`` key holding ``=``, padded override references,
duplicate secret names); their resume command carries what the CLI would
parse, which is what a resume will use.

This module imports only the standard library (and the option help of
``npa_infra.projects``, a package that imports nothing) at import time: the
CLI reads it to build its signature, and ``npa --help`` must stay fast.
``-p/--project`` selects the target: the CLI resolves it into ``--stack``,
``--infra`` and ``--isolated-config-dir`` before building ``SubmitOptions``,
so a resume command names the exact target, never only an alias whose entry
may change. The alias is kept as well (``project``) for what only the
project holds, its credentials and release namespace (issue 17); a resume
that carries both is refused by the selection if the entry has since moved
to another target (``projects.resolve`` rule 5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from npa_infra.projects import PROJECT_HELP, STACK_HELP  # constants; the package imports nothing

__all__ = [
    "COMMAND",
    "OPTIONS",
    "SDK_ONLY",
    "Flag",
    "Kind",
    "Resume",
    "SubmitOptions",
    "fields_from_cli",
    "resume_argv",
]

COMMAND = ("npa", "workbench", "workflow", "submit")
SDK_ONLY = ("project_root",)  # fields with no flag: the CLI's project root is its cwd


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """Every option of ``submit``, typed: what the SDK takes and the CLI builds (``OPTIONS``)."""

    run_id: str | None = None
    resume_run: str | None = None
    plan_only: bool = False
    runtime: bool = False
    variables: Mapping[str, str] = field(default_factory=dict)
    strict: bool = False  # --strict: a --var the spec never reads is an error (issue 18)
    assume_decision: str = ""
    image: str | None = None
    image_overrides: Sequence[tuple[str, str]] = ()
    registry: str | None = None
    infra: str | None = None
    secret_env: Sequence[str] = ()
    stack: str | None = None
    project: str | None = None  # its credentials and release namespace (issue 17)
    max_concurrency: int = 0
    accept_eula: bool = True
    render_dir: Path | None = None
    catalog_path: Path | None = None
    project_root: Path = field(default_factory=Path.cwd)
    resolve_accelerators: bool = True
    sky_bin: str | None = None
    isolated_config_dir: str | None = None
    poll_seconds: float = 30.0
    max_wait_seconds: float = 3600.0
    retries: int = 0
    max_infrastructure_recoveries: int = 1
    infrastructure_grace_seconds: float = 600.0
    permanent_blocker_grace_seconds: float = 0.0  # 0: stop at the first confirming read
    heartbeat_seconds: float = 60.0  # a journaled heartbeat while a wave is supervised; 0 = off
    stale_after_seconds: float = 300.0  # warn once per stall of this long; 0 = off
    preflight_images: bool = True
    image_bootstrap_timeout_seconds: float = 1800.0  # the pull probe's window; 0 = none
    insecure_registries: Sequence[str] = ()
    stage_src: bool = False  # --stage-src: force restaging (runtime-reference.md §6)
    no_stage_src: bool = False  # --no-stage-src: never stage
    source_root: Path | None = None  # --source: the checkout to stage (default: editable npa-infra)


class Kind(StrEnum):
    """How a flag is spelled, and how its words become the field's value."""

    SWITCH = "switch"  # --flag sets True; default False
    SWITCH_OFF = "switch_off"  # --no-flag sets False; default True
    TOGGLE = "toggle"  # --flag/--no-flag; flags[0] on, flags[1] off
    TEXT = "text"  # one string, default None
    DECISION = "decision"  # --assume-decision: one allowed assumption, "" = none
    PATH = "path"  # one path, default None
    INT = "int"
    FLOAT = "float"
    MULTI = "multi"  # repeatable strings, kept in order
    NAMES = "names"  # repeatable environment variable names (never values)
    PAIRS = "pairs"  # repeatable KEY=VALUE, kept in order as (key, value)
    MAPPING = "mapping"  # repeatable KEY=VALUE into a mapping; later values win


class Resume(StrEnum):
    """What the resume command does with an option."""

    CARRY = "carry"  # the run's option: carried when not the default
    REPLACED = "replaced"  # --run-id: the resume names the run with --resume-run instead
    RESUME = "resume"  # --resume-run: written by the resume command itself


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of ``submit``: the ``SubmitOptions`` field and its command-line form."""

    field: str
    flags: tuple[str, ...]  # the first is the one the resume command writes
    kind: Kind
    default: object
    help: str
    minimum: float | None = None
    resume: Resume = Resume.CARRY
    hidden: bool = False


_SECONDS = "(0 = off)."
OPTIONS: tuple[Flag, ...] = (
    Flag("run_id", ("--run-id",), Kind.TEXT, None, "Explicit run id.", resume=Resume.REPLACED),
    Flag(
        "resume_run",
        ("--resume-run",),
        Kind.TEXT,
        None,
        "Re-enter an existing run.",
        resume=Resume.RESUME,
    ),
    Flag("plan_only", ("--plan-only",), Kind.SWITCH, False, "Plan and render; launch nothing."),
    Flag("runtime", ("--runtime",), Kind.SWITCH, False, "One managed job per wave."),
    Flag("variables", ("--var",), Kind.MAPPING, {}, "Config override KEY=VALUE (repeatable)."),
    Flag("strict", ("--strict",), Kind.SWITCH, False, "A --var the spec never reads is an error."),
    Flag(
        "assume_decision",
        ("--assume-decision",),
        Kind.DECISION,
        "",
        "promote_checkpoint | promote | loop_back | loop_back_to_inner_loop",
    ),
    Flag("image", ("--image",), Kind.TEXT, None, "Image for all steps (none = no image)."),
    Flag(
        "image_overrides",
        ("--image-override", "--tool-image"),
        Kind.PAIRS,
        (),
        "TOOL_REF=IMAGE, exact or prefix (repeatable).",
    ),
    Flag("registry", ("--registry",), Kind.TEXT, None, "Registry for catalog images."),
    Flag(
        "insecure_registries",
        ("--insecure-registry",),
        Kind.MULTI,
        (),
        "HOST that may be contacted over plain HTTP (loopback always may; repeatable).",
    ),
    Flag(
        "preflight_images",
        ("--preflight-images", "--no-preflight-images"),
        Kind.TOGGLE,
        True,
        "Check every image's registry manifest, and pull it in-cluster with a probe pod, "
        "before anything is launched.",
    ),
    Flag(
        "image_bootstrap_timeout_seconds",
        ("--image-bootstrap-timeout-seconds",),
        Kind.FLOAT,
        1800.0,
        "How long the pull-probe pod is watched (0 = no deadline).",
        minimum=0.0,
    ),
    Flag("infra", ("--infra",), Kind.TEXT, None, "k8s/<exact context>."),
    Flag(
        "secret_env",
        ("--secret-env",),
        Kind.NAMES,
        (),
        "Environment variable NAME passed as a SkyPilot secret (repeatable).",
    ),
    Flag("stack", ("--stack", "-s"), Kind.TEXT, None, STACK_HELP),
    Flag("project", ("--project", "-p"), Kind.TEXT, None, PROJECT_HELP),
    Flag(
        "max_concurrency",
        ("--max-concurrency",),
        Kind.INT,
        0,
        "Batch cap (0 = none).",
        minimum=0,
    ),
    Flag("accept_eula", ("--no-accept-eula",), Kind.SWITCH_OFF, True, "Clear ACCEPT_EULA=Y."),
    Flag(
        "resolve_accelerators",
        ("--no-resolve-accelerators",),
        Kind.SWITCH_OFF,
        True,
        "Submit the spec's GPU names verbatim (skip the cluster's GPU catalog).",
    ),
    Flag("render_dir", ("--render-dir",), Kind.PATH, None, "Where rendered YAML is written."),
    Flag(
        "catalog_path",
        ("--catalog",),
        Kind.PATH,
        None,
        "Tool catalog JSON (else NPA_TOOL_CATALOG).",
    ),
    Flag("sky_bin", ("--sky-bin",), Kind.TEXT, None, "SkyPilot binary."),
    Flag(
        "isolated_config_dir",
        ("--isolated-config-dir",),
        Kind.TEXT,
        None,
        "SkyPilot state directory.",
    ),
    Flag(
        "poll_seconds",
        ("--poll-seconds",),
        Kind.FLOAT,
        30.0,
        "Runtime poll interval.",
        minimum=0.0,
    ),
    Flag(
        "max_wait_seconds",
        ("--max-wait-seconds",),
        Kind.FLOAT,
        3600.0,
        "Per-wave wait (0 = unbounded).",
        minimum=0.0,
    ),
    Flag(
        "retries",
        ("--retries",),
        Kind.INT,
        0,
        "Payload retries per runtime wave (N+1 attempts).",
        minimum=0,
    ),
    Flag(
        "max_infrastructure_recoveries",
        ("--max-infrastructure-recoveries",),
        Kind.INT,
        1,
        "Verified relaunches per wave on proven transient infrastructure failures (0 = none).",
        minimum=0,
    ),
    Flag(
        "infrastructure_grace_seconds",
        ("--infrastructure-grace-seconds",),
        Kind.FLOAT,
        600.0,
        "How long a transient pending blocker is tolerated before cancel and relaunch.",
        minimum=0.0,
    ),
    Flag(
        "permanent_blocker_grace_seconds",
        ("--permanent-blocker-grace-seconds",),
        Kind.FLOAT,
        0.0,
        "How long a permanent pending blocker (image pull refused, missing Secret, ...) may "
        "hold before the job is cancelled; 0 = at the first read that confirms it.",
        minimum=0.0,
    ),
    Flag(
        "heartbeat_seconds",
        ("--heartbeat-seconds",),
        Kind.FLOAT,
        60.0,
        "While a wave is supervised, journal a heartbeat event (and print a progress line) "
        f"this often {_SECONDS}",
        minimum=0.0,
    ),
    Flag(
        "stale_after_seconds",
        ("--stale-after-seconds",),
        Kind.FLOAT,
        300.0,
        "Warn once (a stale_progress event) when a supervised job's observable state has not "
        "changed for this long while pending, starting or running; never cancels "
        f"{_SECONDS}",
        minimum=0.0,
    ),
    Flag(
        "stage_src",
        ("--stage-src",),
        Kind.SWITCH,
        False,
        "Force restaging the NPA source (conflicts with --image). Default: stage only when "
        "the saved source is missing or outdated.",
    ),
    Flag("no_stage_src", ("--no-stage-src",), Kind.SWITCH, False, "Never stage the NPA source."),
    Flag(
        "source_root",
        ("--source",),
        Kind.PATH,
        None,
        "The checkout to stage (default: npa-infra's own, when installed editable).",
    ),
)


def fields_from_cli(values: Mapping[str, object]) -> dict[str, Any]:
    """The ``SubmitOptions`` keyword arguments of the parsed flags (by field name).

    Raises:
        UsageError: a malformed ``KEY=VALUE``, secret name or decision assumption.
    """
    from npa_infra.workflow.planning import options

    out: dict[str, Any] = {}
    for flag in OPTIONS:
        raw: Any = values[flag.field]
        if flag.kind is Kind.MAPPING:
            out[flag.field] = options.parse_vars(raw or [])
        elif flag.kind is Kind.PAIRS:
            out[flag.field] = tuple(options.parse_overrides(raw or []))
        elif flag.kind is Kind.NAMES:
            out[flag.field] = tuple(options.parse_secret_names(raw or []))
        elif flag.kind is Kind.MULTI:
            out[flag.field] = tuple(raw or [])
        elif flag.kind is Kind.DECISION:
            out[flag.field] = options.check_assumption(raw)
        else:
            out[flag.field] = raw
    return out


def _number(value: float) -> str:
    """Exact and short: ``600`` for 600.0, ``repr`` (which round-trips) otherwise."""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _is_default(flag: Flag, value: Any) -> bool:
    if flag.kind is Kind.MAPPING:
        return not dict(value)
    if flag.kind in (Kind.MULTI, Kind.NAMES, Kind.PAIRS):
        return not tuple(value)
    return bool(value == flag.default)


def _words(flag: Flag, value: Any) -> list[str]:
    name = flag.flags[0]
    if flag.kind in (Kind.SWITCH, Kind.SWITCH_OFF):
        return [name]  # not the default: the flag was given
    if flag.kind is Kind.TOGGLE:
        return [flag.flags[0] if value else flag.flags[1]]
    if flag.kind in (Kind.INT, Kind.FLOAT):
        return [name, str(value) if flag.kind is Kind.INT else _number(value)]
    if flag.kind is Kind.MAPPING:
        return [word for key, item in dict(value).items() for word in (name, f"{key}={item}")]
    if flag.kind is Kind.PAIRS:
        return [word for key, item in value for word in (name, f"{key}={item}")]
    if flag.kind in (Kind.MULTI, Kind.NAMES):
        return [word for item in value for word in (name, str(item))]
    return [name, str(value)]  # TEXT, DECISION, PATH


def resume_argv(spec_path: Path, options: SubmitOptions, run_id: str) -> list[str]:
    """The command that re-enters ``run_id`` with exactly ``options``, as an argv.

    ``npa workbench workflow submit SPEC <non-default options…> --resume-run RUN``.
    """
    spec = str(spec_path)
    words = [*COMMAND, f"./{spec}" if spec.startswith("-") else spec]
    for flag in OPTIONS:
        value = getattr(options, flag.field)
        if flag.resume is Resume.CARRY and not _is_default(flag, value):
            words += _words(flag, value)
    return [*words, "--resume-run", run_id]
