"""The leftovers planner of ``npa cleanup`` (runs.leftovers): each rule, in order, and properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.runs import leftovers as lo
from npa_infra.runs.leftovers import CacheKind, Controller, KeepReason, Verdict
from tests.strategies import leftover_scopes, leftover_worlds

STATE = "/h/skypilot-state/dev"
GONE = lo.StateObservation(STATE, Controller.GONE)


def _cache(
    kind: CacheKind, run_id: str | None = None, proof: lo.Proof = lo.Proof.MARKER
) -> lo.CacheObservation:
    per_state = kind in (CacheKind.TASK_YAML, CacheKind.TICK_FILES, CacheKind.STATE_DIR)
    path = STATE if kind is CacheKind.STATE_DIR else f"/x/{kind.value}"
    return lo.CacheObservation(
        kind, path, 10, run_id=run_id, state_dir=STATE if per_state else None, proof=proof
    )


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (lo.RunObservation("r1", STATE, live=True, inflight=True, locked=True), "inflight_launch"),
        (lo.RunObservation("r1", STATE, live=True, locked=True), "live_run"),
        (lo.RunObservation("r1", STATE, locked=True), "locked"),
        (lo.RunObservation("r1", None, live=True), "live_run"),  # directory unknown: served
    ],
    ids=["inflight-first", "live-before-locked", "locked", "unknown-dir-live"],
)
@pytest.mark.parametrize(
    "kind",
    [CacheKind.RENDERED_YAML, CacheKind.TASK_YAML, CacheKind.TICK_FILES, CacheKind.STATE_DIR,
     CacheKind.SKYPILOT_VENV],
    ids=lambda k: k.value,
)  # fmt: skip
def test_decide_run_that_needs_the_cache_keeps_it_and_is_named(
    run: lo.RunObservation, reason: str, kind: CacheKind
) -> None:
    decision = lo.decide(_cache(kind, "r1"), [run], [GONE])
    assert (decision.verdict, decision.reason, decision.needed_by) == (
        Verdict.KEEP,
        KeepReason(reason),
        ("r1",),
    )


def test_decide_terminal_run_unlocked_cache_is_removed() -> None:
    runs = [lo.RunObservation("r1", STATE)]
    for kind in CacheKind:
        assert lo.decide(_cache(kind, "r1"), runs, [GONE]).verdict is Verdict.REMOVE, kind


def test_decide_other_runs_do_not_keep_a_per_run_cache() -> None:
    runs = [lo.RunObservation("r2", STATE, live=True), lo.RunObservation("r1", "/other", live=True)]
    assert lo.decide(_cache(CacheKind.RENDERED_YAML, "r3"), runs, [GONE]).remove
    # r1 launched from another directory: this directory's task YAML of r1 is not its
    assert lo.decide(_cache(CacheKind.TASK_YAML, "r1"), runs[1:], [GONE]).remove


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (lo.StateObservation(STATE, Controller.GONE, "dev", True), "controller_down_pending"),
        (lo.StateObservation(STATE, Controller.GONE, "dev"), "stack_claimed"),
        (lo.StateObservation(STATE, Controller.UNKNOWN), "controller_not_gone"),
        (lo.StateObservation(STATE, Controller.UP), "controller_not_gone"),
        (None, "controller_not_gone"),
    ],
    ids=["down-record", "stack-owner", "queue-unknown", "controller-up", "not-observed"],
)
def test_decide_state_dir_kept_until_its_controller_is_proven_gone(
    state: lo.StateObservation | None, reason: str
) -> None:
    decision = lo.decide(_cache(CacheKind.STATE_DIR), [], [state] if state else [])
    assert (decision.verdict, decision.reason) == (Verdict.KEEP, KeepReason(reason))
    assert decision.detail


def test_decide_venv_kept_while_a_controller_stands_or_bootstrap_runs() -> None:
    venv = _cache(CacheKind.SKYPILOT_VENV)
    up = lo.decide(venv, [], [GONE, lo.StateObservation("/b", Controller.UNKNOWN)])
    assert (up.reason, "/b" in up.detail) == (KeepReason.CONTROLLER_NOT_GONE, True)
    busy = lo.decide(venv, [], [GONE], bootstrap_locked=True)
    assert busy.reason is KeepReason.BOOTSTRAP_RUNNING
    assert lo.decide(venv, [], [GONE]).remove


def test_runbook_cancel_wait_controller_destroy_cleanup_in_order() -> None:
    assert lo.runbook(["a", "b"], ["dev"]) == [
        "npa workbench workflow cancel a --json",
        "npa workbench workflow cancel b --json",
        "npa workbench workflow status a --watch --json",
        "npa workbench workflow status b --watch --json",
        "npa skypilot cleanup-controller -s dev --yes",
        "npa stack destroy -s dev --yes",
        "npa cleanup --yes",
    ]


@given(leftover_worlds())
def test_plan_any_world_one_decision_per_cache_never_removes_what_a_run_needs(
    world: dict[str, Any],
) -> None:
    decisions = lo.plan(**world)
    assert [d.cache for d in decisions] == world["caches"]
    assert decisions == lo.plan(**world)  # deterministic
    for decision in decisions:
        cache = decision.cache
        if decision.verdict is Verdict.KEEP:
            assert decision.reason is not None and decision.detail
            continue
        assert decision.reason is None and decision.needed_by == ()
        assert cache.proof is not lo.Proof.NONE  # rule 0: only what npa can prove it made
        if cache.kind is CacheKind.TASK_YAML:  # rule 4: its own queue read proves no live job
            [state] = [s for s in world["states"] if s.path == cache.state_dir]
            assert state.controller is not Controller.UNKNOWN
            assert not any(lo.job_may_be_runs(j, cache.run_id or "") for j in state.live_jobs)
        for run in world["runs"]:
            if run.live or run.inflight or run.locked:
                needs = (
                    cache.kind is CacheKind.SKYPILOT_VENV
                    or (cache.run_id == run.run_id and cache.kind is CacheKind.RENDERED_YAML)
                    or (
                        cache.kind in (CacheKind.TICK_FILES, CacheKind.STATE_DIR)
                        and run.state_dir in (None, cache.state_dir)
                    )
                )
                assert not needs, (cache, run)
        standing = [s for s in world["states"] if s.controller is not Controller.GONE]
        if cache.kind is CacheKind.STATE_DIR:
            [state] = [s for s in world["states"] if s.path == cache.path]
            assert state.controller is Controller.GONE
            assert not state.stack_owner and not state.controller_down
        if cache.kind is CacheKind.SKYPILOT_VENV:
            assert not standing and not world["bootstrap_locked"]


# -- a selection's part (-s/--stack, -p/--project) ------------------------------------------

OTHER = "/h/skypilot-state/other"
SCOPE = lo.Scope(frozenset({STATE}), frozenset({"mine"}), frozenset({"theirs"}))


@pytest.mark.parametrize(
    ("cache", "covered"),
    [
        (lo.CacheObservation(CacheKind.RENDERED_YAML, "/r/mine", 1, run_id="mine"), True),
        (lo.CacheObservation(CacheKind.RENDERED_YAML, "/r/theirs", 1, run_id="theirs"), False),
        (lo.CacheObservation(CacheKind.RENDERED_YAML, "/r/orphan", 1, run_id="orphan"), False),
        (lo.CacheObservation(CacheKind.TASK_YAML, "/t", 1, run_id="mine", state_dir=STATE), True),
        (lo.CacheObservation(CacheKind.TASK_YAML, "/t", 1, run_id="orphan", state_dir=STATE),
         True),
        (lo.CacheObservation(CacheKind.TASK_YAML, "/t", 1, run_id="theirs", state_dir=STATE),
         False),
        (lo.CacheObservation(CacheKind.TASK_YAML, "/t", 1, run_id="mine", state_dir=OTHER),
         False),
        (lo.CacheObservation(CacheKind.TICK_FILES, "/s", 1, state_dir=STATE), True),
        (lo.CacheObservation(CacheKind.TICK_FILES, "/s", 1, state_dir=OTHER), False),
        (lo.CacheObservation(CacheKind.STATE_DIR, STATE, 1, state_dir=STATE), True),
        (lo.CacheObservation(CacheKind.STATE_DIR, OTHER, 1, state_dir=OTHER), False),
        (lo.CacheObservation(CacheKind.SKYPILOT_VENV, "/v", 1), True),
        (lo.CacheObservation(CacheKind.PROBE_CACHE, "/p", 1), True),
        (lo.CacheObservation(CacheKind.GATE_CACHE, "/g", 1), True),
    ],
    ids=["rendered-mine", "rendered-theirs", "rendered-unknown-run", "task-mine",
         "task-unknown-run-own-dir", "task-theirs-own-dir", "task-other-dir", "ticks-own",
         "ticks-other", "state-own", "state-other", "venv", "probe-cache", "gate-cache"],
)  # fmt: skip
def test_covers_selection_part_of_each_cache_kind(
    cache: lo.CacheObservation, covered: bool
) -> None:
    assert lo.covers(SCOPE, cache) is covered


@pytest.mark.parametrize(
    "kind", [CacheKind.SKYPILOT_VENV, CacheKind.PROBE_CACHE, CacheKind.GATE_CACHE],
    ids=lambda k: k.value,
)  # fmt: skip
def test_decide_scoped_shared_cache_kept_as_shared(kind: CacheKind) -> None:
    decision = lo.decide(_cache(kind), [], [GONE], scoped=True)
    assert (decision.verdict, decision.reason) == (Verdict.KEEP, KeepReason.SHARED)
    assert "without -s/-p" in decision.detail
    assert lo.decide(_cache(kind), [], [GONE]).remove  # unscoped: every directory was read


def test_decide_scoped_live_run_named_before_shared() -> None:
    run = lo.RunObservation("r1", STATE, live=True)
    decision = lo.decide(_cache(CacheKind.SKYPILOT_VENV), [run], [GONE], scoped=True)
    assert (decision.reason, decision.needed_by) == (KeepReason.LIVE_RUN, ("r1",))


def test_plan_scope_decides_only_the_covered_caches_in_order() -> None:
    marked = lo.Proof.MARKER
    own = lo.CacheObservation(CacheKind.STATE_DIR, STATE, 1, state_dir=STATE, proof=marked)
    other = lo.CacheObservation(CacheKind.STATE_DIR, OTHER, 1, state_dir=OTHER, proof=marked)
    mine = lo.CacheObservation(CacheKind.RENDERED_YAML, "/r/mine", 1, run_id="mine", proof=marked)
    states = [GONE, lo.StateObservation(OTHER, Controller.GONE)]
    decisions = lo.plan([other, mine, own], [], states, scope=SCOPE)
    assert [(d.cache, d.verdict) for d in decisions] == [
        (mine, Verdict.REMOVE),
        (own, Verdict.REMOVE),
    ]
    assert len(lo.plan([other, mine, own], [], states)) == 3


def test_runbook_selector_repeated_on_run_commands_and_cleanup() -> None:
    assert lo.runbook(["r"], ["a"], "-p alpha") == [
        "npa workbench workflow cancel r -p alpha --json",
        "npa workbench workflow status r -p alpha --watch --json",
        "npa skypilot cleanup-controller -s a --yes",
        "npa stack destroy -s a --yes",
        "npa cleanup -p alpha --yes",
    ]


@given(leftover_worlds(), leftover_scopes())
def test_plan_any_scope_decides_only_covered_never_removes_shared(
    world: dict[str, Any], scope: lo.Scope
) -> None:
    decisions = lo.plan(**world, scope=scope)
    assert [d.cache for d in decisions] == [c for c in world["caches"] if lo.covers(scope, c)]
    for decision in decisions:
        if decision.cache.kind in (
            CacheKind.SKYPILOT_VENV,
            CacheKind.PROBE_CACHE,
            CacheKind.GATE_CACHE,
        ):
            assert decision.verdict is Verdict.KEEP
        else:  # a covered cache of the selection is judged as an unscoped cleanup would
            assert decision == lo.decide(decision.cache, world["runs"], world["states"],
                                         bootstrap_locked=world["bootstrap_locked"])  # fmt: skip


# -- issue 24: only what npa can prove it made; what a live job of the queue needs --------


@pytest.mark.parametrize("kind", list(CacheKind), ids=lambda k: k.value)
def test_decide_cache_without_proof_is_kept_whatever_else_holds(kind: CacheKind) -> None:
    decision = lo.decide(_cache(kind, "r1", proof=lo.Proof.NONE), [], [GONE])
    assert (decision.verdict, decision.reason) == (Verdict.KEEP, KeepReason.NOT_NPA_MADE)
    assert "cannot prove" in decision.detail
    assert lo.decide(_cache(kind, "r1"), [], [GONE]).remove  # the same, marked: removed


@pytest.mark.parametrize(
    ("kind", "proof", "removal"),
    [
        (CacheKind.RENDERED_YAML, lo.Proof.JOURNAL, lo.Removal.NPA_FILES),
        (CacheKind.TASK_YAML, lo.Proof.JOURNAL, lo.Removal.NPA_FILES),
        (CacheKind.RENDERED_YAML, lo.Proof.MARKER, lo.Removal.TREE),
        (CacheKind.TASK_YAML, lo.Proof.MARKER, lo.Removal.TREE),
        (CacheKind.STATE_DIR, lo.Proof.JOURNAL, lo.Removal.TREE),
        (CacheKind.SKYPILOT_VENV, lo.Proof.NPA_NAME, lo.Removal.TREE),
    ],
    ids=["rendered-journal", "task-journal", "rendered-marker", "task-marker",
         "state-journal", "venv-name"],
)  # fmt: skip
def test_decide_removal_journal_proof_of_a_run_directory_removes_npa_files_only(
    kind: CacheKind, proof: lo.Proof, removal: lo.Removal
) -> None:
    decision = lo.decide(_cache(kind, "r1", proof=proof), [], [GONE])
    assert (decision.remove, decision.removal) == (True, removal)


@pytest.mark.parametrize(
    ("jobs", "kept"),
    [
        (("r1",), True),
        (("r1-a2",), True),
        (("r1-00-train",), True),
        (("r10",), False),
        (("r2-00-train", "other"), False),
        ((), False),
    ],
    ids=["one-shot", "attempt-2", "runtime-wave", "longer-run-id", "other-runs", "no-job"],
)
def test_decide_task_yaml_kept_while_its_queue_lists_a_live_job_of_the_run(
    jobs: tuple[str, ...], kept: bool
) -> None:
    state = lo.StateObservation(STATE, Controller.UP, live_jobs=jobs)
    decision = lo.decide(_cache(CacheKind.TASK_YAML, "r1"), [], [state])
    assert decision.remove is not kept
    if kept:
        assert decision.reason is KeepReason.LIVE_JOB and jobs[0] in decision.detail


@pytest.mark.parametrize(
    "states",
    [[lo.StateObservation(STATE, Controller.UNKNOWN)], []],
    ids=["queue-unknown", "not-observed"],
)
def test_decide_task_yaml_kept_while_its_queue_is_not_read(
    states: list[lo.StateObservation],
) -> None:
    decision = lo.decide(_cache(CacheKind.TASK_YAML, "r1"), [], states)
    assert (decision.verdict, decision.reason) == (Verdict.KEEP, KeepReason.LIVE_JOB)


_RUN_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1)


@given(_RUN_TEXT, st.integers(0, 99), st.text(min_size=1, max_size=70), st.integers(1, 12))
def test_job_may_be_runs_every_name_the_run_gets(
    run_id: str, index: int, wave_name: str, attempt: int
) -> None:
    """Agrees with the naming rule itself (plan.waves.job_name, cli.md §0): never misses."""
    from npa_infra.plan import waves
    from npa_infra.plan.model import Wave

    wave = Wave(index, "serial", "", wave_name, 1, 1, ())
    assert lo.job_may_be_runs(waves.job_name(run_id, None, attempt), run_id)
    assert lo.job_may_be_runs(waves.job_name(run_id, wave, attempt), run_id)
