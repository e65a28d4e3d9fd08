"""The text plan: each step's loop place and command (issue 18)."""

from __future__ import annotations

import pytest

from npa_infra.plan import textplan
from npa_infra.plan.model import Plan, PlanStep


def _step(
    *,
    argv: tuple[str, ...] = (),
    shell: str = "",
    tool_ref: str = "",
    iteration: int | None = None,
    loops: tuple[tuple[str, int], ...] = (),
) -> PlanStep:
    return PlanStep(
        "train", iteration, "", "", argv, shell, tool_ref, "cpu", {}, (), (), loops=loops
    )


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            _step(argv=("python3", "-c", "print('a b')")),
            "argv: python3 -c 'print('\"'\"'a b'\"'\"')'",
        ),
        (_step(shell="  echo hi\n"), "shell: echo hi"),
        (_step(shell="set -e\n\necho one\necho two\n"), "shell: set -e (+2 lines)"),
        (_step(tool_ref="t.x", argv=("run",)), "toolRef=t.x argv: run"),
        (_step(), "argv: (none)"),
    ],
    ids=["argv-quoted", "shell-one-line", "shell-many-lines", "tool-ref", "empty"],
)
def test_command_each_kind_rendered_as_run(step: PlanStep, expected: str) -> None:
    assert textplan.command(step) == expected


@pytest.mark.parametrize("width", [10, 40, 96])
def test_command_long_argv_cut_at_width_with_ellipsis(width: int) -> None:
    text = textplan.command(_step(argv=("x" * 200,)), width)

    assert len(text) == width
    assert text.endswith("...")


def test_command_long_multiline_shell_keeps_line_count_within_width() -> None:
    text = textplan.command(_step(shell="y" * 300 + "\nz"), 40)

    assert len(text) == 40
    assert text.endswith("... (+1 lines)")


def test_step_name_and_where_number_leaf_and_sequence_loops() -> None:
    assert textplan.step_name(_step(iteration=2)) == "train#2"
    assert textplan.step_name(_step()) == "train"
    assert textplan.where(_step(loops=(("outer", 1), ("inner", 3)))) == "loop outer#1/inner#3"
    assert textplan.where(_step()) == ""


def test_plan_lines_header_steps_and_fingerprint() -> None:
    plan = Plan("wf", "v", "train", "r", "promote_checkpoint", (_step(iteration=1, shell="go"),))

    assert textplan.plan_lines(plan, None, "sha256:f") == [
        "workflow: wf",
        "assume_decision: promote_checkpoint",
        "01. train#1  shell: go",
        "fingerprint: sha256:f",
    ]
