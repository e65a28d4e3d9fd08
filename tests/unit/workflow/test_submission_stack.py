"""A live submit runs against the stack's outputs when the engine has them; plan-only reads the file.

The engine is injected as ``Services.stack_engine``: a stand-in that answers
``outputs`` (the Automation API's ``pulumi stack output``), or one that must not
be opened at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import pytest

from npa_infra.stack.models import OutputEntry
from npa_infra.stack.runner import RunnerSettings
from npa_infra.workflow.submission import pipeline, submitflags
from npa_infra.workflow.target.services import Services

ROOT = Path(__file__).resolve().parents[3]


def _options(**kw: object) -> submitflags.SubmitOptions:
    return submitflags.SubmitOptions(stack="dev", project_root=ROOT, **kw)  # type: ignore[arg-type]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A ``pulumi`` on PATH (the engine check passes; the stand-in engine answers)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    passphrase = tmp_path / "passphrase"
    passphrase.write_text("x", encoding="utf-8")
    return {
        "PATH": str(bin_dir),
        "NPA_HOME": str(tmp_path / "home"),
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
    }


class OutputsEngine:
    """A stack engine that only answers ``outputs``."""

    def __init__(self, outputs: dict[str, OutputEntry]) -> None:
        self.values = outputs
        self.opened: list[str] = []

    def open(self, settings: RunnerSettings) -> OutputsEngine:
        self.opened.append(settings.stack)
        return self

    def outputs(self) -> dict[str, OutputEntry]:
        return self.values


def test_stack_settings_plan_only_reads_the_file_without_the_engine(
    env: dict[str, str],
) -> None:
    def never(_settings: RunnerSettings) -> NoReturn:
        raise AssertionError("plan-only must not open the Pulumi engine")

    settings = pipeline._stack_settings(_options(plan_only=True), env, Services(stack_engine=never))
    assert settings is not None and settings.name == "dev"


def test_stack_settings_live_prefers_the_stack_outputs(env: dict[str, str]) -> None:
    engine = OutputsEngine(
        {
            "context": OutputEntry("from-outputs"),
            "namespace": OutputEntry("team-out"),
            "controller_name": OutputEntry("sky-jobs-controller-1"),
            "isolated_config_dir": OutputEntry("/state/dev"),
        }
    )

    settings = pipeline._stack_settings(_options(), env, Services(stack_engine=engine.open))

    assert engine.opened == ["dev"]
    assert settings is not None
    assert (settings.context, settings.isolated_config_dir) == ("from-outputs", "/state/dev")


def test_stack_settings_without_stack_is_none() -> None:
    assert pipeline._stack_settings(submitflags.SubmitOptions(project_root=ROOT), {}) is None
