"""Job names are one-to-one over launch identities (cli.md §0; issue 24).

Two distinct run ids never share a job name, in one-shot or in runtime mode,
for any wave, batch and attempt; names stay valid SkyPilot names of at most 60
characters, and a run id that already names its job stays the name.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from npa_infra.plan import waves
from npa_infra.plan.model import Wave
from tests.strategies import attempts, run_id_variants, run_ids, wave_identities

SKY_NAME = re.compile(r"[a-zA-Z](?:[-_.a-zA-Z0-9]*[a-zA-Z0-9])?")  # SkyPilot 0.12.2's rule
Identity = tuple[str, int, str, int | None]


def _wave(index: int, name: str) -> Wave:
    return Wave(index, "serial", "", name, 1, 1, ())


def runtime_name(identity: Identity, attempt: int) -> str:
    run, index, name, batch = identity
    return waves.job_name(run, _wave(index, name), attempt, batch=batch)


@st.composite
def one_shot_pairs(draw: st.DrawFn) -> tuple[tuple[str, int], tuple[str, int]]:
    first = draw(run_ids())
    return (first, draw(attempts)), (draw(run_id_variants(first)), draw(attempts))


@st.composite
def runtime_pairs(draw: st.DrawFn) -> tuple[tuple[Identity, int], tuple[Identity, int]]:
    first = draw(wave_identities())
    run, index, name, batch = first
    second = draw(
        st.sampled_from(["variant", "same-run", "resplit", "any"]).flatmap(
            lambda how: {
                "variant": run_id_variants(run).map(lambda r: (r, index, name, batch)),
                "same-run": wave_identities(run),
                "resplit": wave_identities(),
                "any": wave_identities(),
            }[how]
        )
    )
    return (first, draw(attempts)), (second, draw(attempts))


@given(one_shot_pairs())
def test_job_name_one_shot_distinct_identities_never_share_a_name(
    pair: tuple[tuple[str, int], tuple[str, int]],
) -> None:
    (run_a, attempt_a), (run_b, attempt_b) = pair
    if (run_a, attempt_a) != (run_b, attempt_b):
        assert waves.job_name(run_a, attempt=attempt_a) != waves.job_name(run_b, attempt=attempt_b)


@given(runtime_pairs())
def test_job_name_runtime_distinct_identities_never_share_a_name(
    pair: tuple[tuple[Identity, int], tuple[Identity, int]],
) -> None:
    (first, attempt_a), (second, attempt_b) = pair
    if (first, attempt_a) != (second, attempt_b):
        assert runtime_name(first, attempt_a) != runtime_name(second, attempt_b)


@given(run_ids().flatmap(lambda r: st.lists(st.tuples(run_id_variants(r), attempts), max_size=30)))
def test_job_name_one_shot_many_ids_map_one_to_one(ids: list[tuple[str, int]]) -> None:
    distinct = set(ids)
    assert len({waves.job_name(r, attempt=a) for r, a in distinct}) == len(distinct)


@given(run_ids(), st.lists(st.tuples(wave_identities(), attempts), max_size=30))
def test_job_name_runtime_waves_of_one_run_map_one_to_one(
    run: str, drawn: list[tuple[Identity, int]]
) -> None:
    distinct = {((run, *identity[1:]), attempt) for identity, attempt in drawn}
    assert len({runtime_name(i, a) for i, a in distinct}) == len(distinct)


@given(wave_identities(), attempts)
def test_job_name_runtime_is_a_valid_sky_name_of_at_most_60_chars(
    identity: Identity, attempt: int
) -> None:
    name = runtime_name(identity, attempt)
    assert len(name) <= 60
    assert SKY_NAME.fullmatch(name), name
    assert name == name.lower()
    assert name.endswith(f"-a{attempt}") or attempt < 2


@given(run_ids(), attempts)
def test_job_name_one_shot_is_a_valid_sky_name_of_at_most_60_chars(run: str, attempt: int) -> None:
    name = waves.job_name(run, attempt=attempt)
    assert len(name) <= 60
    assert SKY_NAME.fullmatch(name), name
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")


@given(st.from_regex(r"\A[a-z][a-z0-9-]{0,54}[a-z]\Z"), st.integers(1, 99))
def test_job_name_one_shot_plain_lowercase_id_is_kept(run: str, attempt: int) -> None:
    """The documented name stays: existing journals and docs remain valid."""
    suffix = f"-a{attempt}" if attempt > 1 else ""
    if re.search(r"-a[0-9]+$", run) is None:
        assert waves.job_name(run, attempt=attempt) == run + suffix


def test_job_name_one_shot_underscore_and_dash_ids_get_distinct_jobs() -> None:
    """The review's case: ``rel_col`` and ``rel-col`` shared job 1."""
    assert waves.job_name("rel-col") == "rel-col"
    assert re.fullmatch(r"rel-col-[0-9a-f]{10}", waves.job_name("rel_col"))


def test_job_name_one_shot_auto_ids_of_a_long_workflow_in_one_hour_differ() -> None:
    """Fresh ids of a 48+ character ``metadata.name`` used to keep only date and hour."""
    slug = "a-very-long-workflow-name-that-is-forty-eight-ch"
    first = f"{slug}-20250101T120000123456Z-a1b2c3"
    second = f"{slug}-20250101T125959000001Z-d4e5f6"
    assert waves.job_name(first) != waves.job_name(second)


def test_job_name_runtime_long_id_names_every_wave_apart() -> None:
    """A long id used to give waves 0-9 (and so on) one name: later waves adopted wave 0's."""
    run = "r" * 58
    names = {waves.job_name(run, _wave(i, "stage")) for i in range(40)}
    assert len(names) == 40


def test_job_name_runtime_batches_of_a_long_wave_stay_apart_at_every_attempt() -> None:
    run = "r" * 50
    names = {
        waves.job_name(run, _wave(3, "g" * 20), attempt, batch=batch)
        for batch in range(1, 6)
        for attempt in range(1, 4)
    }
    assert len(names) == 15


def test_job_name_run_id_copied_from_a_hashed_job_name_gets_its_own() -> None:
    hashed = waves.job_name("rel_col")
    assert waves.job_name(hashed) != hashed


def test_job_name_digit_first_id_starts_with_a_letter() -> None:
    assert waves.job_name("2025-exp").startswith("npa-2025-exp-")
