"""What ``--stack``/``--project`` select (projects.resolve): the rules of issue 16, crossed."""

from __future__ import annotations

import pytest
from hypothesis import given

from npa_infra.projects.models import Origin, RunIdentity, Selection
from npa_infra.projects.record import Project
from npa_infra.projects.resolve import (
    Entry,
    EntryState,
    Known,
    Reason,
    Refusal,
    Request,
    resolve,
)
from tests.strategies import project_resolutions

PATH = "/home/u/.npa/projects/team.yaml"
ABSENT = Entry(EntryState.ABSENT, PATH)
UNREADABLE = Entry(EntryState.UNREADABLE, PATH, problem="not a mapping")
BOUND_STACK = Entry(EntryState.PRESENT, PATH, project=Project(alias="team", stack="prod"))
BOUND_CONTEXT = Entry(
    EntryState.PRESENT,
    PATH,
    project=Project(alias="team", context="kind-a", namespace="ns", state_dir="/s"),
)
KNOWN = Known(projects=("alpha", "team-b"), stacks=("dev", "prod"))


@pytest.mark.parametrize(
    ("request_", "entry", "exists", "expected"),
    [
        (Request(), None, False, Selection()),
        (Request(stack="dev"), None, False, Selection(origin=Origin.STACK, stack="dev")),
        (
            Request(project="team"),
            BOUND_STACK,
            True,
            Selection(origin=Origin.PROJECT, project="team", stack="prod"),
        ),
        (
            Request(project="team", context="kind-a"),
            BOUND_CONTEXT,
            False,
            Selection(
                origin=Origin.PROJECT,
                project="team",
                context="kind-a",
                namespace="ns",
                state_dir="/s",
            ),
        ),
        (
            Request(stack="prod", project="team"),
            BOUND_STACK,
            False,
            Selection(origin=Origin.PROJECT, project="team", stack="prod"),
        ),
        (
            Request(project="team"),
            ABSENT,
            True,
            Selection(origin=Origin.STACK_PROJECT, project="team", stack="team"),
        ),
        (
            Request(stack="team", project="team"),
            ABSENT,
            True,
            Selection(origin=Origin.STACK_PROJECT, project="team", stack="team"),
        ),
    ],
    ids=[
        "nothing",
        "stack_only",
        "entry_binds_stack_over_same_named_stack",
        "entry_binds_context",
        "stack_agrees_with_entry",
        "stack_backed_project",
        "stack_agrees_with_stack_backed",
    ],
)
def test_resolve_selects_binding(
    request_: Request, entry: Entry | None, exists: bool, expected: Selection
) -> None:
    assert resolve(request_, entry, stack_exists=exists, known=KNOWN) == expected


@pytest.mark.parametrize(
    ("request_", "entry", "exists", "reason", "words"),
    [
        (Request(project="../x"), None, False, Reason.INVALID_ALIAS, "'../x'"),
        (Request(project="team"), UNREADABLE, True, Reason.UNREADABLE_ENTRY, PATH),
        (Request(stack="dev", project="team"), BOUND_STACK, True, Reason.STACK_DISAGREES, "prod"),
        (
            Request(stack="dev", project="team"),
            BOUND_CONTEXT,
            False,
            Reason.STACK_DISAGREES,
            "no stack",
        ),
        (
            Request(project="team", context="kind-b"),
            BOUND_CONTEXT,
            False,
            Reason.CONTEXT_DISAGREES,
            "kind-a",
        ),
        (Request(stack="dev", project="team"), ABSENT, True, Reason.STACK_DISAGREES, "team"),
        (Request(project="team"), ABSENT, False, Reason.UNKNOWN_PROJECT, "alpha, team-b"),
    ],
    ids=[
        "invalid_alias",
        "unreadable_entry_never_falls_back_to_stack",
        "stack_disagrees_with_entry",
        "stack_beside_context_project",
        "context_disagrees",
        "stack_disagrees_with_stack_backed",
        "unknown",
    ],
)
def test_resolve_refuses_with_reason(
    request_: Request, entry: Entry | None, exists: bool, reason: Reason, words: str
) -> None:
    decided = resolve(request_, entry, stack_exists=exists, known=KNOWN)

    assert isinstance(decided, Refusal)
    assert decided.reason is reason
    assert words in decided.message
    assert decided.remedy


def test_resolve_unknown_lists_projects_and_stacks_and_remedy() -> None:
    decided = resolve(Request(project="team"), ABSENT, stack_exists=False, known=KNOWN)

    assert isinstance(decided, Refusal)
    assert "projects: alpha, team-b; stacks: dev, prod" in decided.message
    assert "-s/--stack NAME" in decided.remedy
    assert decided.details["projects"] == ["alpha", "team-b"]


@given(project_resolutions())
def test_resolve_any_input_follows_the_rule_chain(drawn: tuple[object, ...]) -> None:
    request, entry, exists, known = drawn
    assert isinstance(request, Request) and isinstance(known, Known)
    assert entry is None or isinstance(entry, Entry)
    assert isinstance(exists, bool)

    decided = resolve(request, entry, stack_exists=exists, known=known)

    if request.project is None:  # no project: the stack alone, never a refusal
        assert decided == (
            Selection(origin=Origin.STACK, stack=request.stack) if request.stack else Selection()
        )
        return
    assert entry is not None
    if entry.state is EntryState.UNREADABLE:  # unknown is not absent
        assert isinstance(decided, Refusal) and decided.reason is Reason.UNREADABLE_ENTRY
        assert entry.path in decided.message
        return
    if entry.state is EntryState.PRESENT:  # the entry binds, whatever stack exists
        assert entry.project is not None
        bound = entry.project
        stack_ok = request.stack is None or request.stack == bound.stack
        context_ok = not (request.context and bound.context and request.context != bound.context)
        if stack_ok and context_ok:
            assert isinstance(decided, Selection)
            assert (decided.origin, decided.stack, decided.context) == (
                Origin.PROJECT,
                bound.stack,
                bound.context,
            )
        else:
            assert isinstance(decided, Refusal)
            assert decided.reason in (Reason.STACK_DISAGREES, Reason.CONTEXT_DISAGREES)
        return
    if exists:  # no entry: the stack of that name is the project
        if request.stack in (None, request.project):
            assert decided == Selection(
                origin=Origin.STACK_PROJECT, project=request.project, stack=request.project
            )
        else:
            assert isinstance(decided, Refusal) and decided.reason is Reason.STACK_DISAGREES
        return
    assert isinstance(decided, Refusal) and decided.reason is Reason.UNKNOWN_PROJECT
    for name in (*known.projects, *known.stacks):
        assert name in decided.message


CTX_P = Selection(origin=Origin.PROJECT, project="p", context="kind-a")
CTX_P_DIR = Selection(origin=Origin.PROJECT, project="p", context="kind-a", state_dir="/s/p")


def run(
    stack: str | None = None,
    context: str | None = "kind-a",
    project: str | None = None,
    state_dir: str | None = None,
) -> RunIdentity:
    return RunIdentity(stack=stack, context=context, project=project, state_dir=state_dir)


@pytest.mark.parametrize(
    ("selection", "identity", "admitted"),
    [
        (Selection(), run("dev"), True),
        (Selection(origin=Origin.STACK, stack="dev"), run("dev", "kind-b"), True),
        (Selection(origin=Origin.STACK, stack="dev"), run("prod"), False),
        (Selection(origin=Origin.STACK, stack="dev"), run(None, project="dev"), False),
        (CTX_P, run(project="p"), True),
        (CTX_P, run(project="p", context="kind-b"), True),
        (CTX_P, run(project="q"), False),
        (CTX_P, run(), False),
        (CTX_P, run("dev", project="p"), False),
        (CTX_P_DIR, run(state_dir="/s/p"), True),
        (CTX_P_DIR, run(state_dir="/s/q"), False),
        (CTX_P_DIR, run(project="q", state_dir="/s/p"), False),
        (Selection(context="kind-a"), run(), True),
        (Selection(context="kind-a"), run(context="kind-b"), False),
    ],
    ids=[
        "none_admits_all",
        "same_stack",
        "other_stack",
        "stackless_run",
        "context_project_its_run",
        "context_project_its_run_elsewhere",
        "context_project_other_projects_run",
        "context_project_run_of_no_project",
        "context_project_stack_run",
        "context_project_legacy_run_in_its_state_dir",
        "context_project_legacy_run_elsewhere",
        "context_project_other_project_in_its_state_dir",
        "bare_context_stackless_run",
        "bare_context_other_context",
    ],
)
def test_selection_admits_runs_by_the_targets_own_identity(
    selection: Selection, identity: RunIdentity, admitted: bool
) -> None:
    assert selection.admits(identity) is admitted


def test_run_identity_of_a_journal_row() -> None:
    data = {"context": "kind-a", "project": "p", "isolated_config_dir": "/s/p", "x": 1}
    assert RunIdentity.of("", data) == run(None, "kind-a", "p", "/s/p")
    assert RunIdentity.of("dev", None) == run("dev", None)


def test_selection_infra_given_wins_else_project_context() -> None:
    bound = Selection(origin=Origin.PROJECT, project="p", context="kind-a")
    assert bound.infra(None) == "k8s/kind-a"
    assert bound.infra("k8s/kind-b") == "k8s/kind-b"
    assert Selection().infra(None) is None
