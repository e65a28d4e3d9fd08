"""A live submit runs against the stack's outputs when the engine has them; plan-only reads the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.target import stackfile

ROOT = Path(__file__).resolve().parents[3]


def _options(**kw: object) -> submitflags.SubmitOptions:
    return submitflags.SubmitOptions(stack="dev", project_root=ROOT, **kw)  # type: ignore[arg-type]


def test_stack_settings_plan_only_reads_the_file_without_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def engine(*_: object, **__: object) -> stackfile.StackSettings:
        raise AssertionError("plan-only must not ask the Pulumi engine")

    monkeypatch.setattr(stackfile, "resolve_stack", engine)
    settings = pipeline._stack_settings(_options(plan_only=True), {})
    assert settings is not None and settings.name == "dev"


def test_stack_settings_live_prefers_the_stack_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def from_outputs(name: str, root: Path, env: object, **_: object) -> stackfile.StackSettings:
        calls.append(name)
        return stackfile.StackSettings(
            name=name, path=str(root), context="from-outputs", isolated_config_dir="/state/dev"
        )

    monkeypatch.setattr(stackfile, "resolve_stack", from_outputs)
    settings = pipeline._stack_settings(_options(), {})
    assert calls == ["dev"]
    assert settings is not None
    assert (settings.context, settings.isolated_config_dir) == ("from-outputs", "/state/dev")


def test_stack_settings_without_stack_is_none() -> None:
    assert pipeline._stack_settings(submitflags.SubmitOptions(project_root=ROOT), {}) is None
