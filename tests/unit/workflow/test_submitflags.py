"""``submit``'s options exist once (issue 15): the table, ``SubmitOptions`` and the typer command
agree, and every printed ``--resume-run`` command parses back into the run's options."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from npa_infra.cli import flags
from npa_infra.cli.main import app
from npa_infra.errors import InvariantError
from npa_infra.workflow.execution import liverun
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.supervision import runner
from tests import strategies

REPO = Path(__file__).resolve().parents[3]
MINIMAL = REPO / "workflows" / "testing" / "minimal.yaml"
# presentation: not the run (-p/--project is in the table since issue 17: its credentials and
# release namespace are the run's, so its resume command carries the alias with the target)
OUTPUT_ONLY = {"as_json", "output_format", "resume_alias"}


def _submit_command() -> typer.core.TyperCommand:
    command: Any = typer.main.get_command(app)
    for name in ("workbench", "workflow", "submit"):
        command = command.commands[name]
    assert isinstance(command, typer.core.TyperCommand)
    return command


def _field_default(field: dataclasses.Field[Any]) -> object:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def _canonical(options: submitflags.SubmitOptions) -> dict[str, object]:
    """The effective options: sequences as tuples, mappings as dicts."""
    out: dict[str, object] = {}
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if isinstance(value, list | tuple):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        elif isinstance(value, dict):
            value = dict(value)
        out[field.name] = value
    return out


@pytest.fixture
def captured() -> Iterator[list[tuple[Path, submitflags.SubmitOptions]]]:
    with pytest.MonkeyPatch.context() as patch:
        yield _capture(patch)


def _capture(patch: pytest.MonkeyPatch) -> list[tuple[Path, submitflags.SubmitOptions]]:
    """Replace the submit SDK function with one that records what the CLI parsed."""
    calls: list[tuple[Path, submitflags.SubmitOptions]] = []

    def submit(spec: Path, options: submitflags.SubmitOptions, **_: Any) -> liverun.LiveResult:
        calls.append((spec, options))
        run = options.resume_run or options.run_id or "fresh"
        return liverun.LiveResult(run, "w", "one-shot", "SUBMITTED", None, [], None, [])

    patch.setattr(pipeline, "submit", submit)
    return calls


def _invoke_printed(command: str) -> None:
    argv = shlex.split(command)
    assert argv[:4] == list(submitflags.COMMAND)
    result = CliRunner().invoke(app, argv[1:], catch_exceptions=False)
    assert result.exit_code == 0, result.output


# -- one table, one dataclass, one typer command --------------------------------------------


def test_submit_table_fields_are_exactly_the_submit_options_fields_with_their_defaults() -> None:
    fields = {f.name: f for f in dataclasses.fields(submitflags.SubmitOptions)}
    table = {flag.field: flag for flag in submitflags.OPTIONS}

    assert len(table) == len(submitflags.OPTIONS)  # one entry per field
    assert set(table) | set(submitflags.SDK_ONLY) == set(fields)
    assert not set(table) & set(submitflags.SDK_ONLY)
    assert {name: _field_default(fields[name]) for name in table} == {
        name: flag.default for name, flag in table.items()
    }


def test_submit_typer_parameters_are_exactly_the_table_with_its_flags_and_defaults() -> None:
    params = {p.name: p for p in _submit_command().params if isinstance(p, typer.core.TyperOption)}
    table = {flag.field: flag for flag in submitflags.OPTIONS}

    assert set(params) - OUTPUT_ONLY == set(table)
    for name, flag in table.items():
        option = params[name]
        spelled = [*option.opts, *option.secondary_opts]
        assert spelled == list(flag.flags), name
        assert option.default == flags.cli_default(flag), name
    absent = {name: flags.cli_default(flag) for name, flag in table.items()}
    assert submitflags.fields_from_cli(absent) == {
        name: flag.default for name, flag in table.items()
    }  # absent flags give the dataclass defaults


def test_submit_flags_each_spelled_by_one_option_only() -> None:
    spelled = [word for flag in submitflags.OPTIONS for word in flag.flags]
    assert len(spelled) == len(set(spelled))


# -- the resume command ---------------------------------------------------------------------


def test_resume_argv_default_options_only_the_spec_and_the_run() -> None:
    argv = submitflags.resume_argv(Path("a spec.yaml"), submitflags.SubmitOptions(), "r-1")
    assert argv == [*submitflags.COMMAND, "a spec.yaml", "--resume-run", "r-1"]


def test_resume_argv_run_id_replaced_by_resume_run() -> None:
    options = submitflags.SubmitOptions(run_id="r-1", stack="dev", catalog_path=Path("c d.json"))
    argv = submitflags.resume_argv(MINIMAL, options, "r-1")
    assert "--run-id" not in argv
    assert argv[-2:] == ["--resume-run", "r-1"]
    assert argv[argv.index("--catalog") + 1] == "c d.json"


def test_resume_command_of_an_argv_not_resuming_the_run_is_a_bug() -> None:
    with pytest.raises(InvariantError):
        liverun.resume_command(["npa", "workbench", "workflow", "submit", "s.yaml"], "r-1")


@given(
    fields=strategies.submit_option_fields(),
    run=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True),
    given_as=st.sampled_from(["run_id", "resume_run", None]),
    spec=st.sampled_from(["spec.yaml", "dir with spaces/spec's.yaml", "-dash.yaml", "/abs/x.yaml"]),
)
@example(
    fields={"variables": {"K": "a=b"}, "secret_env": ("TOKEN",), "catalog_path": Path("a b")},
    run="r-1",
    given_as="run_id",
    spec="spec.yaml",
)
def test_resume_command_printed_reproduces_the_effective_options(
    fields: dict[str, Any], run: str, given_as: str | None, spec: str
) -> None:
    # a project alias must name an entry or a stack where the command runs (selection refuses
    # any other): test_resume_command_carries_the_project_and_its_target covers it
    fields = {**fields, "project": None}
    original = submitflags.SubmitOptions(**fields, **({given_as: run} if given_as else {}))
    command = liverun.resume_command(submitflags.resume_argv(Path(spec), original, run), run)

    with pytest.MonkeyPatch.context() as patch:
        calls = _capture(patch)
        _invoke_printed(command)

    ((parsed_spec, parsed),) = calls
    assert parsed_spec == Path(spec) or str(parsed_spec) == f"./{spec}"
    expected = _canonical(dataclasses.replace(original, run_id=None, resume_run=run))
    assert _canonical(parsed) == expected


# -- both paths build the request's resume command from the options --------------------------


def test_submit_cli_resume_command_from_the_options_not_argv(
    captured: list[tuple[Path, submitflags.SubmitOptions]],
) -> None:
    result = CliRunner().invoke(
        app,
        ["workbench", "workflow", "submit", str(MINIMAL), "--run-id", "r-2", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0
    ((spec, options),) = captured
    argv = submitflags.resume_argv(spec, options, "r-2")
    assert "--json" not in argv and "--run-id" not in argv  # output flags are not the run's
    assert argv == [*submitflags.COMMAND, str(MINIMAL), "--resume-run", "r-2"]


def test_submit_sdk_live_request_invocation_carries_every_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[liverun.LiveRequest] = []
    monkeypatch.setattr(runner, "execute", lambda request, *a, **k: requests.append(request))
    options = submitflags.SubmitOptions(
        run_id="sdk-1",
        infra="k8s/ctx",
        resolve_accelerators=False,
        preflight_images=False,
        registry="registry.example.com/team",
        secret_env=("NPA_TEST_TOKEN",),
        max_wait_seconds=12.5,
        heartbeat_seconds=0.0,
        isolated_config_dir=str(tmp_path / "sky state"),
    )
    env = {"NPA_HOME": str(tmp_path / "home"), "NPA_TEST_TOKEN": "canary-secret-value"}

    pipeline.submit(MINIMAL, options, env=env)

    (request,) = requests
    assert list(request.invocation) == submitflags.resume_argv(MINIMAL, options, "sdk-1")
    words = list(request.invocation)
    for flag, value in [
        ("--registry", "registry.example.com/team"),
        ("--secret-env", "NPA_TEST_TOKEN"),
        ("--max-wait-seconds", "12.5"),
        ("--heartbeat-seconds", "0"),
        ("--isolated-config-dir", str(tmp_path / "sky state")),
    ]:
        assert words[words.index(flag) + 1] == value
    command = liverun.resume_command(request.invocation, "sdk-1")
    assert command.endswith("--resume-run sdk-1")
    assert "canary-secret-value" not in command  # secrets by name only


def test_resume_command_carries_the_project_and_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npa_infra.projects import store
    from npa_infra.projects.record import Project

    monkeypatch.setenv("NPA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    store.save(Project(alias="lab", context="kind-lab", state_dir="/state"), os.environ)
    with pytest.MonkeyPatch.context() as patch:
        calls = _capture(patch)
        result = CliRunner().invoke(
            app,
            ["workbench", "workflow", "submit", "spec.yaml", "-p", "lab", "--run-id", "r-1"],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    ((_, first),) = calls
    assert (first.project, first.infra, first.isolated_config_dir) == (
        "lab",
        "k8s/kind-lab",
        "/state",
    )

    argv = submitflags.resume_argv(Path("spec.yaml"), first, "r-1")

    assert argv[argv.index("--project") + 1] == "lab"
    assert argv[argv.index("--infra") + 1] == "k8s/kind-lab"
    with pytest.MonkeyPatch.context() as patch:
        calls = _capture(patch)
        _invoke_printed(shlex.join(argv))
    ((_, resumed),) = calls
    assert dataclasses.replace(resumed, resume_run=None) == dataclasses.replace(first, run_id=None)
