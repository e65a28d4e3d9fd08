"""Hypothesis strategies for workflow specs and token text (style.md rule 19).

Four families:

- ``mutated_spec_texts`` / ``mutated_spec_bytes``: the specs under
  ``workflows/testing`` and ``workflows/main``, parsed, then mutated (keys
  deleted, values retyped, references renamed, unknown keys added) and dumped
  back, optionally with random text or bytes spliced in;
- ``random_spec_texts``: small specs assembled from random state fields that
  reference each other, mostly invalid;
- ``valid_spec_texts``: specs built to be valid (a chain of leaves, leaf
  loops, parallel groups, sequence loops and decision branches), for
  properties of planning and waves;
- ``sky_command_results``: finished ``sky`` commands whose output mixes the
  recorded 0.12 lines (banner, ClusterNotUpError, queue JSON, cancel and down
  lines, ANSI codes) with arbitrary text and exit codes, for the totality of
  the SkyPilot output classifier.
- ``supervision_scenarios``: one supervised wave's random world: a SkyPilot
  status timeline per launch (pending, starting, running, then maybe a
  payload or infrastructure failure or success), per-poll pod events (image
  pull hiccups and auth failures, missing Secrets, unschedulable shapes,
  NotReady nodes, preemption, running, done), sparse unreadable queues, and
  small ``--retries`` / ``--max-infrastructure-recoveries`` budgets.
- ``gpu_node_lists`` / ``accelerator_requests``: Kubernetes nodes with real
  GPU label keys and values (GFD, Nebius, SkyPilot, GKE spellings, the
  labelling race), taints, readiness and cordons, and ``NAME:N`` requests
  near those names, for the GPU resolver's properties.
- ``missing_sequences``: one supervised job's reads, present, missing from a
  readable answer or unreadable, with what a name lookup would answer, for the
  lost-job rule of runtime-reference.md §1.
- ``permanent_pull_messages`` / ``transient_pull_messages``: image pull
  failure texts holding a permanent token of kubernetes.md §6.3 (in any case
  and position), or a registry failure that may pass, for the pending-pod
  classifier's pull rows.
- ``pull_secret_layers`` / ``image_id_texts`` / ``probe_observation_fields``:
  the three ``imagePullSecrets`` layers of skypilot-0.12.md §9.3, runtime
  ``imageID`` spellings, and every field of a pull-probe observation, for the
  overlay rule and the probe verdict's totality (kubernetes.md §9).
- ``submit_option_fields``: ``SubmitOptions`` keyword arguments drawn from
  ``workflow.submission.submitflags``' table, each option at its default or at a value
  the CLI can spell (quotes, spaces, ``=`` and leading dashes in values,
  repeatables, secret names), for the resume command's round trip.
- ``run_outcome_evidence``: a run's planned jobs, the attempts a driver made
  of the ones it took (well-formed walks, or repeats, skips, unplanned
  names and unknown results) and how it stopped, for ``runs.outcome``.
- ``drift_observations``: what the SkyPilot drift gate observes: a venv in
  any state with versions in and out of the pins (or missing), any owner of
  the API server port or none checked, and any set of IAM token names, for
  the totality and rule order of ``skypilot.drift.decide``.
- ``sky_output_fragments``: the lines a ``sky jobs launch`` prints, recorded
  known-failure lines (runs.skyoutput) among ordinary ones and near misses, for
  the recogniser's "same first recognition however the lines break" property.
- ``attempt_refs`` / ``run_entries``: a run's journaled attempts (waves, consecutive
  attempts, adopted ids or none) and journal runs beside plan-only run ids (any
  status, times stepping back), for ``workflow logs``' selection and ``workflow
  list``'s rows.
- ``run_ids`` / ``run_id_variants`` / ``wave_identities`` / ``attempts``: valid run ids
  that lowercasing, sanitising and the 60-character cut confuse (case swaps, ``_``/``-``/``.``
  swaps, shared long prefixes, ``-aN`` and hash-shaped tails, a run's own job name used as
  a run id), and runtime wave identities re-split so ``<run>-<WW>-<wave>`` reads alike,
  for the one-to-one job names of ``plan.waves`` (issue 24).
- ``drain_worlds``: nodes, pods bound to them (or elsewhere; DaemonSet, mirror,
  terminating) and PodDisruptionBudgets with any selector, amount, eviction
  policy and status, for the drain preview's rules (kubernetes.md §7).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from npa_infra.kube.models import NodeInfo, Taint
from npa_infra.registry.models import ProbeCleanup
from npa_infra.runs import outcome
from npa_infra.skypilot import drift, port
from npa_infra.skypilot.models import CommandResult
from npa_infra.workflow.submission import submitflags
from npa_infra.workflow.submission.submitflags import Kind

__all__ = [
    "SEED_SPECS",
    "accelerator_requests",
    "attempt_refs",
    "controller_gate_inputs",
    "drain_worlds",
    "drift_observations",
    "duplicate_key_documents",
    "gpu_node_lists",
    "graph_labels",
    "hex_texts",
    "image_id_texts",
    "image_reference_texts",
    "leftover_scopes",
    "missing_sequences",
    "mutated_spec_bytes",
    "mutated_spec_texts",
    "permanent_pull_messages",
    "probe_observation_fields",
    "project_resolutions",
    "pull_secret_layers",
    "random_spec_texts",
    "run_entries",
    "run_outcome_evidence",
    "sky_check_results",
    "sky_command_results",
    "sky_output_fragments",
    "source_files",
    "submit_option_fields",
    "supervision_scenarios",
    "token_contexts",
    "token_texts",
    "transient_pull_messages",
    "valid_spec_texts",
    "www_authenticate_texts",
]

REPO = Path(__file__).resolve().parents[1]
SEED_DIRS = (REPO / "workflows" / "testing", REPO / "workflows" / "main")
SEED_SPECS: tuple[tuple[str, str], ...] = tuple(
    sorted(
        (path.name, path.read_text(encoding="utf-8"))
        for folder in SEED_DIRS
        for path in folder.glob("*.yaml")
    )
)

TOOL_REFS = (
    "workbench.rerun.report",
    "workbench.sim2real.split",
    "workbench.sim2real.decide",
    "workbench.isaac_lab.envgen",
    "workbench.cosmos_curate.curate_variants",
    "workbench.sim2real.run",
)
PREDICATES = ("promote_checkpoint", "loop_back", "maybe")
TOKENISH = (
    "{{config.bucket}}",
    "{{config.root_uri}}/x",
    "{{config.missing}}",
    "{{run.id}}",
    "{{run.nope}}",
    "{{state.a.uri}}",
    "{{state.b.output_2}}",
    "{{loop.rounds}}",
    "{{config.bucket|base64}}",
    "{{config.bucket|upper}}",
    "{{params.x}}",
    '{{"k": 1}}',
    "config.k",
    "{{config.k}}",
    "3",
    "-1",
)
SPLICES = (
    "{{",
    "}}",
    ": ",
    "- ",
    "\t",
    "[",
    "]",
    "{",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!python/object ",
    "\ufeff",
    "\x00",
    "\n  x: 1\n",
    '"',
    "'",
    "#",
    "%YAML 1.1\n",
    "---\n",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=300),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.sampled_from(TOKENISH),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3),
    ),
    max_leaves=6,
)


# -- mutation of the seed specs ---------------------------------------------------------

Path_ = tuple[str | int, ...]


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    if isinstance(node, dict):
        for key, child in node.items():
            path = (*prefix, key)
            out.append(path)
            out.extend(_paths(child, path))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            path = (*prefix, index)
            out.append(path)
            out.extend(_paths(child, path))
    return out


def _state_names(data: Any) -> list[str]:
    states = data.get("states") if isinstance(data, dict) else None
    return [str(k) for k in states] if isinstance(states, dict) else []


def _mutate_once(draw: st.DrawFn, data: Any) -> Any:
    # deep paths under `states` first: hypothesis favours early choices, and
    # mutating a state field exercises more checks than deleting apiVersion
    paths = sorted(_paths(data), key=lambda p: (p[0] != "states", -len(p)))
    if not paths:
        return draw(values)
    path = draw(st.sampled_from(paths))
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    op = draw(st.sampled_from(("delete", "retype", "rename", "add_key", "duplicate")))
    if op == "delete":
        del parent[key]
    elif op == "retype":
        parent[key] = draw(values)
    elif op == "rename":
        names = [*_state_names(data), "missing-state", "", "states"]
        if isinstance(parent[key], str):
            parent[key] = draw(st.sampled_from(names))
        elif isinstance(parent, dict) and isinstance(key, str):
            # rename the key itself (a state, a field, a config key)
            parent[draw(st.sampled_from([*names, key + "x", key.upper()]))] = parent.pop(key)
    elif op == "add_key":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            field = draw(
                st.sampled_from(
                    (
                        "next",
                        "terminal",
                        "loop",
                        "sequence",
                        "parallel",
                        "transitions",
                        "needs",
                        "toolRef",
                        "run",
                        "params",
                        "trigger",
                        "writesDecision",
                        "maxConcurrency",
                        "parallelCount",
                        "resources",
                        "outputs",
                        "colour",
                    )
                )
            )
            target[field] = draw(
                st.one_of(
                    values,
                    st.sampled_from(_state_names(data) or ["a"]),
                    st.lists(st.sampled_from(_state_names(data) or ["a"]), max_size=3),
                    st.sampled_from(TOOL_REFS),
                    st.builds(
                        lambda g, w: {"goto": g, "when": w},
                        st.sampled_from(_state_names(data) or ["a"]),
                        st.sampled_from(PREDICATES),
                    ).map(lambda t: [t]),
                    st.builds(
                        lambda m, u: {"max": m, "until": u},
                        st.sampled_from(TOKENISH),
                        st.sampled_from(PREDICATES),
                    ),
                )
            )
    elif op == "duplicate" and isinstance(parent, list):
        parent.append(parent[key])
    return data


@st.composite
def mutated_spec_data(draw: st.DrawFn) -> Any:
    """A seed spec's data after one to four random mutations."""
    _name, text = draw(st.sampled_from(SEED_SPECS))
    data: Any = yaml.safe_load(text)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        data = _mutate_once(draw, data)
    return data


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _splice(draw: st.DrawFn, text: str) -> str:
    piece = draw(st.one_of(st.sampled_from(SPLICES), st.text(max_size=16)))
    at = draw(st.integers(min_value=0, max_value=len(text)))
    return text[:at] + piece + text[at:]


@st.composite
def mutated_spec_texts(draw: st.DrawFn) -> str:
    """Mutated seed specs as YAML text, sometimes with random text spliced in."""
    if draw(st.booleans()):
        text = _dump(draw(mutated_spec_data()))
    else:
        text = draw(st.sampled_from(SEED_SPECS))[1]
    for _ in range(draw(st.sampled_from((0, 0, 0, 1, 2)))):
        text = _splice(draw, text)
    return text


@st.composite
def mutated_spec_bytes(draw: st.DrawFn) -> bytes:
    """Seed spec bytes with random bytes spliced in (binary, bad UTF-8, NULs)."""
    raw = draw(st.sampled_from(SEED_SPECS))[1].encode("utf-8")
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        piece = draw(st.binary(min_size=1, max_size=8))
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + piece + raw[at:]
    return raw


# -- random specs -------------------------------------------------------------------------

NAMES = ("a", "b", "c", "d", "e")


@st.composite
def _random_state(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    name = st.sampled_from([*names, "zz"])
    fields: dict[str, Any] = {}
    pool = {
        "run": st.one_of(
            st.fixed_dictionaries({"shell": st.sampled_from(["echo {{run.id}}", *TOKENISH])}),
            st.fixed_dictionaries({"argv": st.lists(st.sampled_from(TOKENISH), max_size=3)}),
            values,
        ),
        "toolRef": st.sampled_from(TOOL_REFS),
        "next": name,
        "terminal": st.one_of(st.booleans(), values),
        "sequence": st.lists(name, max_size=3),
        "parallel": st.lists(name, max_size=3),
        "loop": st.fixed_dictionaries(
            {"max": st.sampled_from([1, 2, 3, 0, "2", "config.k", "{{config.k}}", "x"])},
            optional={"until": st.sampled_from(PREDICATES)},
        ),
        "transitions": st.lists(
            st.fixed_dictionaries(
                {"goto": name},
                optional={
                    "when": st.sampled_from(PREDICATES),
                    "if": st.sampled_from(["config.flag", "config.k"]),
                },
            ),
            max_size=2,
        ),
        "needs": st.lists(name, max_size=2),
        "outputs": st.lists(
            st.fixed_dictionaries(
                {"uri": st.sampled_from(TOKENISH)},
                optional={"schema": st.sampled_from(["x.decision.v1", "plain"])},
            ),
            max_size=2,
        ),
        "params": st.dictionaries(st.sampled_from(["k", "tag", "flag"]), scalars, max_size=2),
        "writesDecision": st.booleans(),
        "maxConcurrency": st.sampled_from([1, 2, 65, "config.k"]),
        "parallelCount": st.sampled_from([1, 2, 3, "config.k"]),
        "resources": st.sampled_from(["default", "gpu", "missing"]),
        "trigger": st.fixed_dictionaries(
            {"uri": st.sampled_from(TOKENISH)},
            optional={"pollSeconds": st.sampled_from([0, 1, "{{config.k}}"])},
        ),
    }
    for key in draw(st.lists(st.sampled_from(sorted(pool)), max_size=5, unique=True)):
        fields[key] = draw(pool[key])
    return fields


@st.composite
def random_spec_texts(draw: st.DrawFn) -> str:
    """Small specs whose states reference each other at random; mostly invalid."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    spec = {
        "apiVersion": "npa.workflow/v0.0.1",
        "kind": "Workflow",
        "metadata": {"name": "random"},
        "config": {
            "bucket": "b",
            "root_uri": "s3://b/r",
            "k": draw(st.sampled_from(["2", "0", 3, "x"])),
            "flag": draw(st.sampled_from(["0", "", True])),
        },
        "resources": {"gpu": {"accelerators": draw(st.sampled_from(["H100:1", "H100:0"]))}},
        "states": {n: draw(_random_state(names)) for n in names},
    }
    return _dump(spec)


# -- valid specs ----------------------------------------------------------------------------


class _Builder:
    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}
        self.with_outputs: list[str] = []

    def leaf(self, draw: st.DrawFn, name: str, *, in_loop: str = "") -> dict[str, Any]:
        kind = draw(st.sampled_from(("argv", "shell", "tool")))
        ref = ""
        if self.with_outputs and draw(st.booleans()):
            ref = "{{state." + draw(st.sampled_from(self.with_outputs)) + ".uri}}"
        state: dict[str, Any]
        if kind == "tool":
            state = {"toolRef": draw(st.sampled_from(TOOL_REFS[:2]))}
        elif kind == "argv":
            argv = ["echo", "{{config.root_uri}}", "{{run.id}}"]
            if ref:
                argv.append(ref)
            if in_loop:
                argv.append("{{config.tag}}")
            state = {"run": {"argv": argv}}
        else:
            state = {"run": {"shell": f"echo {ref} {{{{config.bucket}}}}"}}
        if in_loop:
            state["params"] = {"tag": "iter-{{loop." + in_loop + "}}"}
        if draw(st.booleans()):
            suffix = "/{{loop." + in_loop + "}}" if in_loop else ""
            state["outputs"] = [{"uri": "{{config.root_uri}}/" + name + suffix}]
        return state

    def record(self, name: str, state: dict[str, Any], *, top_level: bool) -> None:
        self.states[name] = state
        if top_level and state.get("outputs") and "loop" not in state:
            self.with_outputs.append(name)


@st.composite
def valid_spec_texts(draw: st.DrawFn) -> str:
    """A valid spec: a ``next`` chain of 1-5 stages ending at a terminal leaf."""
    kinds = draw(
        st.lists(
            st.sampled_from(("leaf", "leaf_loop", "parallel", "sequence", "branch")),
            max_size=5,
        )
    )
    b = _Builder()
    stage_names = [f"s{i}" for i in range(len(kinds))] + ["end"]
    for i, kind in enumerate(kinds):
        name, following = stage_names[i], stage_names[i + 1]
        if kind == "leaf":
            state = b.leaf(draw, name)
            state["next"] = following
            b.record(name, state, top_level=True)
        elif kind == "leaf_loop":
            state = b.leaf(draw, name, in_loop=name)
            state["loop"] = {"max": draw(st.sampled_from([1, 2, 3, "2", "config.rounds"]))}
            if draw(st.booleans()):
                state["loop"]["until"] = draw(st.sampled_from(PREDICATES[:2]))
            state["next"] = following
            b.record(name, state, top_level=True)
        elif kind == "parallel":
            members = [f"{name}-m{j}" for j in range(draw(st.integers(1, 4)))]
            group: dict[str, Any] = {"parallel": members, "next": following}
            if draw(st.booleans()):
                group["maxConcurrency"] = draw(st.integers(1, len(members) + 2))
            if draw(st.booleans()):
                group["parallelCount"] = len(members)
            b.record(name, group, top_level=True)
            for member in members:
                b.record(member, b.leaf(draw, member), top_level=False)
        elif kind == "sequence":
            children = [f"{name}-c{j}" for j in range(draw(st.integers(1, 3)))]
            seq: dict[str, Any] = {"sequence": children, "next": following}
            looped = draw(st.booleans())
            if looped:
                seq["loop"] = {"max": draw(st.sampled_from([1, 2, 3, "{{config.rounds}}"]))}
                if draw(st.booleans()):
                    seq["loop"]["until"] = "promote_checkpoint"
            b.record(name, seq, top_level=True)
            for j, child in enumerate(children):
                state = b.leaf(draw, child, in_loop=name if looped else "")
                if j == len(children) - 1 and draw(st.booleans()):
                    state.pop("toolRef", None)
                    state.setdefault("run", {"shell": "echo decide"})
                    state["writesDecision"] = True
                    state["outputs"] = [
                        {"uri": "{{config.root_uri}}/decision.json", "schema": "t.decision.v1"}
                    ]
                b.record(child, state, top_level=False)
        else:
            state = b.leaf(draw, name)
            state["transitions"] = draw(
                st.sampled_from(
                    (
                        [{"when": "promote_checkpoint", "goto": following}, {"goto": following}],
                        [{"if": "config.flag", "goto": following}],
                        [{"when": "loop_back", "goto": following}],
                    )
                )
            )
            state["next"] = following
            b.record(name, state, top_level=True)
    end = b.leaf(draw, "end")
    end["terminal"] = True
    b.record("end", end, top_level=True)
    spec = {
        "apiVersion": draw(st.sampled_from(("npa.workflow/v0.0.1", "npa.workflow/v0.0.1-beta"))),
        "kind": "Workflow",
        "metadata": {"name": "generated"},
        "config": {
            "bucket": "b",
            "root_uri": "s3://{{config.bucket}}/{{run.id}}",
            "rounds": "2",
            "flag": draw(st.sampled_from(["0", "", "1"])),
            "train_fraction": "0.5",
        },
        "states": b.states,
    }
    return _dump(spec)


# -- tokens ------------------------------------------------------------------------------------

token_texts = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.one_of(
            st.sampled_from(
                (
                    "{{",
                    "}}",
                    "{",
                    "}",
                    "|",
                    "|base64",
                    "|upper",
                    " ",
                    ".",
                    "config",
                    "run",
                    "state",
                    "loop",
                    "params",
                    "uri",
                    "output_1",
                    "output_0",
                    "a",
                    "id",
                    "-",
                    "_",
                    '"k":1',
                )
            ),
            st.text(max_size=4),
        ),
        max_size=14,
    ).map("".join),
)

_token_values = st.one_of(
    st.text(max_size=10),
    st.booleans(),
    st.integers(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.dictionaries(st.sampled_from(("a", "b")), st.text(max_size=3), max_size=2),
)
_keys = st.sampled_from(("a", "b", "id", "prefix", "a.b", "uri", "x-y"))


@st.composite
def token_contexts(draw: st.DrawFn) -> dict[str, Any]:
    """Keyword arguments for ``TokenContext``: random values under plausible keys."""
    return {
        "config": draw(st.dictionaries(_keys, _token_values, max_size=4)),
        "run": draw(st.dictionaries(_keys, _token_values, max_size=3)),
        "state_outputs": draw(
            st.dictionaries(
                st.sampled_from(("a", "b", "a.b")),
                st.dictionaries(
                    st.sampled_from(("uri", "output_1", "output_2")), st.text(max_size=5)
                ),
                max_size=2,
            )
        ),
        "loop_iterations": draw(
            st.dictionaries(st.sampled_from(("a", "b")), st.integers(-1, 5), max_size=2)
        ),
        "allow_state": draw(st.booleans()),
        "allow_loop": draw(st.booleans()),
    }


SKY_LINES = (
    "\x1b[2mFailed to connect to SkyPilot API server at http://127.0.0.1:46580. "
    "Starting a local server.\x1b[0m",
    "\x1b[0m\x1b[32m✓ SkyPilot API server started. \x1b[0m\x1b[0m",
    "sky.exceptions.ClusterNotUpError: No in-progress managed jobs.",
    "No in-progress managed jobs. (See: sky jobs -h)",
    "Submitted sky.jobs.launch request: 3f2b8c1e-9d4a-4e6b-8f00-1a2b3c4d5e6f",
    "Job with ID 3 is scheduled to be cancelled.",
    "Jobs with IDs 3, 4 are scheduled to be cancelled.",
    "'x' Job with ID 99999999999999999999999 is scheduled to be cancelled.",
    "No job to cancel.",
    "No running job found with name 'x'.",
    "Managed jobs controller has already been torn down.",
    "sky.exceptions.NotSupportedError: In-progress managed jobs found.",
    "Aborted!",
    "Usage: sky jobs queue [OPTIONS]",
    "Error: No such option: --x",
    "requests.exceptions.HTTPError: 503 Server Error",
    "(403) Forbidden",
    "Could not connect to SkyPilot API server",
    "skypilot, version 0.12.2",
    '[{"job_id": 1, "task_id": 0, "job_name": "a", "status": "RUNNING"}]',
    '[{"job_id": 1e999, "task_id": 1e999, "status": "PENDING", "submitted_at": 1e999}]',
    '[{"job_id": 1, "task_id": "x", "status": "SUCCEEDED", "end_at": ' + "9" * 400 + "}]",
    "[" * 50,
    "[]",
    "[1, 2]",
    '{"jobs": []}',
)


@st.composite
def _sky_json(draw: st.DrawFn) -> str:
    scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    status = st.sampled_from(("PENDING", "RUNNING", "SUCCEEDED", "CANCELLING", "FAILED", "??"))
    row = st.fixed_dictionaries(
        {"job_id": scalar | st.integers(0, 9), "status": status | scalar},
        optional={"task_id": scalar, "job_name": scalar, "submitted_at": scalar, "end_at": scalar},
    )
    return json.dumps(draw(st.lists(row | scalar, max_size=3)))


@st.composite
def sky_command_results(draw: st.DrawFn) -> CommandResult:
    """A finished ``sky`` command: recorded lines, JSON rows and arbitrary text, any exit."""
    piece = st.sampled_from(SKY_LINES) | _sky_json() | st.text(max_size=40)
    stream = st.lists(piece, max_size=5).map("\n".join)
    code = st.sampled_from((0, 1, 2, 100, 101, 102, 103, 126, 127, -9)) | st.integers()
    return CommandResult(
        argv=("sky",),
        returncode=draw(code),
        stdout=draw(stream),
        stderr=draw(stream),
        timed_out=draw(st.booleans()),
    )


GPU_LABELS: tuple[tuple[str, str], ...] = (
    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    ("nvidia.com/gpu.product", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"),
    ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"),
    ("nvidia.com/gpu.product", "Tesla-T4"),
    ("nebius.com/gpu-name", "RTX6000"),
    ("nebius.com/gpu-name", "H100"),
    ("nebius.com/gpu-name", "rtx6000"),
    ("skypilot.co/accelerator", "rtxpro6000"),
    ("skypilot.co/accelerator", "B200"),
    ("cloud.google.com/gke-accelerator", "nvidia-l4"),
    ("nebius.com/gpu", "gpu-h100-sxm"),
    ("gpu.nvidia.com/class", "H100_NVLINK_80GB"),
)
REQUEST_NAMES = (
    "H100",
    "H100-80GB",
    "h100_80gb",
    "RTXPRO6000",
    "RTX6000",
    "RTXPRO-6000-BLACKWELL-SERVER-EDITION",
    "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
    "A100",
    "T4",
    "L4",
    "B200",
    "RTX6000-Ada",
)
_TAINTS = (
    Taint("nvidia.com/gpu", "present", "NoSchedule"),
    Taint("dedicated", "infra", "NoSchedule"),
    Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
    Taint("spot", "true", "PreferNoSchedule"),
)


@st.composite
def _gpu_node(draw: st.DrawFn, index: int) -> NodeInfo:
    pairs = draw(st.lists(st.sampled_from(GPU_LABELS), max_size=3))
    labels = {"kubernetes.io/hostname": f"node-{index}", **dict(pairs)}
    return NodeInfo(
        name=f"node-{index}",
        labels=labels,
        taints=tuple(draw(st.lists(st.sampled_from(_TAINTS), max_size=2, unique=True))),
        ready=draw(st.booleans()),
        unschedulable=draw(st.booleans()),
        allocatable_gpus=draw(st.sampled_from((0, 1, 2, 4, 8))),
    )


@st.composite
def gpu_node_lists(draw: st.DrawFn) -> list[NodeInfo]:
    """Up to six nodes with realistic GPU labels, in API order."""
    count = draw(st.integers(min_value=0, max_value=6))
    return [draw(_gpu_node(i)) for i in range(count)]


@st.composite
def accelerator_requests(draw: st.DrawFn) -> str:
    """``NAME:N`` near the labelled names, plus the odd malformed or arbitrary request."""
    name = draw(st.one_of(st.sampled_from(REQUEST_NAMES), st.text(max_size=12)))
    form = draw(st.sampled_from(("count", "bare", "junk")))
    if form == "bare":
        return name
    if form == "junk":
        return f"{name}:{draw(st.text(max_size=4))}"
    return f"{name}:{draw(st.integers(min_value=0, max_value=16))}"


# -- launch-transaction classifier (npa_infra/runs/classifier.py) ---------------------------
# (phrase, category value) for every substring of runtime-reference.md §1 Classifier plus
# npa-infra's additions; terminal phrases first, in table order.
CLASSIFIER_TERMINAL_PHRASES: tuple[tuple[str, str], ...] = (
    ("identity mismatch", "identity"),
    ("wrong context", "identity"),
    ("belongs to", "identity"),
    ("context does not exist", "context"),
    ("context not found", "context"),
    ("not found in kubeconfig", "context"),
    ("invalid context", "context"),
    ("invalid kube-context", "context"),
    ("no current-context", "context"),
    ("not in allowed_contexts", "context"),
    ("forbidden", "rbac"),
    ("permission denied", "rbac"),
    ("cannot list", "rbac"),
    ("cannot get resource", "rbac"),
    ("cannot create resource", "rbac"),
    ("(403)", "rbac"),
    ("unauthorized", "auth"),
    ("authentication required", "auth"),
    ("authentication failed", "auth"),
    ("credentials expired", "auth"),
    ("invalid bearer token", "auth"),
    ("exec plugin", "auth"),
    ("(401)", "auth"),
    ("certificate signed by unknown authority", "certificate"),
    ("certificate has expired", "certificate"),
    ("x509:", "certificate"),
    ("invalid kubeconfig", "config"),
    ("failed to load kubeconfig", "config"),
    ("no such file or directory", "config"),
    ("executable file not found", "config"),
    ("invalid pod_config", "schema"),
    ("validation error", "schema"),
    ("invalid yaml", "schema"),
    ("schema", "schema"),
    ("insufficient", "capacity"),
    ("quota", "capacity"),
    ("failed_prechecks", "capacity"),
    ("no resource", "capacity"),
    ("unschedulable", "capacity"),
    ("imagepull", "workload"),
    ("errimagepull", "workload"),
    ("failed_setup", "workload"),
    ("workload failed", "workload"),
)
CLASSIFIER_TRANSIENT_PHRASES: tuple[tuple[str, str], ...] = (
    ("could not connect to skypilot api server", "api_warmup"),
    ("failed to connect to skypilot api server", "api_warmup"),
    ("skypilot api server is starting", "api_warmup"),
    ("apiserverconnectionerror", "api_warmup"),
    ("too many requests", "kubernetes_rate_limit"),
    ("status code 429", "kubernetes_rate_limit"),
    ("http 429", "kubernetes_rate_limit"),
    ("429 client error", "kubernetes_rate_limit"),
    ("status code 500", "kubernetes_server"),
    ("status code 502", "kubernetes_server"),
    ("status code 503", "kubernetes_server"),
    ("status code 504", "kubernetes_server"),
    ("500 server error", "kubernetes_server"),
    ("502 server error", "kubernetes_server"),
    ("503 server error", "kubernetes_server"),
    ("504 server error", "kubernetes_server"),
    ("internal server error", "kubernetes_server"),
    ("service unavailable", "kubernetes_server"),
    ("bad gateway", "kubernetes_server"),
    ("gateway timeout", "kubernetes_server"),
    ("connection refused", "kubernetes_transport"),
    ("connection reset", "kubernetes_transport"),
    ("connection aborted", "kubernetes_transport"),
    ("unexpected eof", "kubernetes_transport"),
    ("eof", "kubernetes_transport"),
    ("tls handshake timeout", "kubernetes_transport"),
    ("temporary failure in name resolution", "kubernetes_transport"),
    ("no route to host", "kubernetes_transport"),
    ("network is unreachable", "kubernetes_transport"),
    ("i/o timeout", "kubernetes_transport"),
    ("dial tcp", "kubernetes_transport"),
    ("server closed idle connection", "kubernetes_transport"),
    ("remotedisconnected", "kubernetes_transport"),
)
_CLASSIFIER_NOISE = st.text(
    alphabet=st.sampled_from(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .:/-_"
    ),
    max_size=30,
)
_ANSI_CODES = ("", "\x1b[31m", "\x1b[0m", "\x1b[1;33m", "\x1b[2K")


@st.composite
def _phrase(draw: st.DrawFn, table: tuple[tuple[str, str], ...]) -> str:
    """One table phrase, randomly upper/title-cased and wrapped in ANSI codes and spaces."""
    phrase, _ = draw(st.sampled_from(table))
    cased = draw(st.sampled_from((phrase, phrase.upper(), phrase.title())))
    return f" {draw(st.sampled_from(_ANSI_CODES))}{cased}{draw(st.sampled_from(_ANSI_CODES))} "


@st.composite
def classifier_texts(draw: st.DrawFn) -> str:
    """Arbitrary failure text: noise, table phrases of either kind, ANSI codes, any order."""
    parts = draw(
        st.lists(
            st.one_of(
                _CLASSIFIER_NOISE,
                st.text(max_size=20),
                _phrase(CLASSIFIER_TERMINAL_PHRASES),
                _phrase(CLASSIFIER_TRANSIENT_PHRASES),
            ),
            max_size=6,
        )
    )
    return "".join(parts)


@st.composite
def terminal_and_transient_texts(draw: st.DrawFn) -> str:
    """Text holding at least one terminal and one transient phrase, shuffled among noise."""
    parts = [
        draw(_phrase(CLASSIFIER_TERMINAL_PHRASES)),
        draw(_phrase(CLASSIFIER_TRANSIENT_PHRASES)),
        *draw(st.lists(st.one_of(_CLASSIFIER_NOISE, st.text(max_size=10)), max_size=4)),
    ]
    return "".join(draw(st.permutations(parts)))


# -- registry references and challenges (registry.md §1, §2) -----------------------------------

_REF_PIECES = (
    "ghcr.io/",
    "localhost:5000/",
    "127.0.0.1:5001/",
    "docker.io/",
    "[::1]:5000/",
    "Registry.Example.COM/",
    "library/",
    "team/app",
    "python",
    "nvidia/cuda",
    "a__b",
    "a---b",
    "UPPER",
    ":3.11-slim",
    ":latest",
    ":-bad",
    ":" + "t" * 130,
    "@sha256:" + "0" * 64,
    "@sha256:abc",
    "@sha512:" + "f" * 128,
    "/",
    "//",
    ":",
    "@",
    "tool://workbench",
    " ",
)


@st.composite
def image_reference_texts(draw: st.DrawFn) -> str:
    """Image references near the grammar: real pieces joined in any order, plus arbitrary text."""
    pieces = draw(st.lists(st.sampled_from(_REF_PIECES), max_size=6))
    noise = draw(st.text(max_size=12))
    return draw(st.sampled_from(("".join(pieces), noise, "".join(pieces) + noise)))


_CHALLENGE_PIECES = (
    "Bearer ",
    "Basic ",
    "Negotiate ",
    'realm="https://auth.docker.io/token"',
    "realm=https://r.example/t?x=1",
    'service="registry.docker.io"',
    'scope="repository:library/python:pull"',
    'error="insufficient_scope"',
    '"',
    "\\",
    ",",
    ", ",
    "=",
    "==",
    "abc==",
    ' realm="unterminated',
)


@st.composite
def www_authenticate_texts(draw: st.DrawFn) -> str:
    """``WWW-Authenticate`` values: well-formed challenge parts shuffled with arbitrary text."""
    pieces = draw(st.lists(st.sampled_from(_CHALLENGE_PIECES), max_size=10))
    noise = draw(st.text(max_size=16))
    return draw(st.sampled_from(("".join(pieces), noise, noise.join(pieces))))


_PATH_SEGMENT = st.text(
    alphabet=st.characters(
        codec="utf-8", categories=("L", "N"), include_characters="._-", exclude_characters="/"
    ),
    min_size=1,
    max_size=8,
).filter(lambda segment: segment not in (".", ".."))


@st.composite
def source_files(draw: st.DrawFn, min_size: int = 0) -> list[tuple[str, bool, bytes]]:
    """In-memory checkouts ``[(posix path, executable, bytes)]`` with unique, normal paths,
    for the source fingerprint's properties (runtime-reference.md §6)."""
    paths = draw(
        st.lists(
            st.lists(_PATH_SEGMENT, min_size=1, max_size=3).map("/".join),
            min_size=min_size,
            max_size=12,
            unique=True,
        )
    )
    return [(path, draw(st.booleans()), draw(st.binary(max_size=64))) for path in paths]


POD_EVENTS = (
    "image_pull_brief",  # ImagePullBackOff on a registry timeout: transient
    "image_pull_auth",  # ErrImagePull 401: permanent
    "missing_secret",  # CreateContainerConfigError: permanent
    "unschedulable_gpu",  # Insufficient nvidia.com/gpu
    "impossible_shape",  # no node offers the requested GPU product
    "unschedulable_cpu",  # Insufficient cpu: capacity, transient
    "node_not_ready",
    "node_ready",
    "preempted",  # DisruptionTarget=True
    "running",
    "succeeded",
    "failed",
)
_ENDINGS = (None, "SUCCEEDED", "FAILED", "FAILED_SETUP", "FAILED_NO_RESOURCE", "FAILED_CONTROLLER")


@st.composite
def _status_timeline(draw: st.DrawFn) -> list[str]:
    pending = ["PENDING"] * draw(st.integers(min_value=1, max_value=14))
    starting = ["STARTING"] * draw(st.integers(min_value=0, max_value=2))
    running = ["RUNNING"] * draw(st.integers(min_value=0, max_value=4))
    end = draw(st.sampled_from(_ENDINGS))
    return [*pending, *starting, *running, *([end] if end else [])]


@st.composite
def supervision_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """``{retries, recoveries, timelines (one per possible launch), pod_events (per poll,
    as runs of one event), unreadable_queue_calls}`` for the supervision property test."""
    retries = draw(st.integers(min_value=0, max_value=2))
    recoveries = draw(st.integers(min_value=0, max_value=2))
    runs = draw(
        st.lists(
            st.tuples(st.sampled_from(POD_EVENTS), st.integers(min_value=1, max_value=12)),
            max_size=8,
        )
    )
    return {
        "retries": retries,
        "recoveries": recoveries,
        "timelines": [draw(_status_timeline()) for _ in range(1 + retries + recoveries)],
        "pod_events": [event for event, count in runs for _ in range(count)],
        "unreadable_queue_calls": sorted(
            draw(st.sets(st.integers(min_value=1, max_value=80), max_size=3))
        ),
    }


# -- the in-cluster pull probe (kubernetes.md §4.4, §9; skypilot-0.12.md §9.3) ----------------

PROBE_DIGEST = "sha256:" + "a" * 64


def hex_texts(size: int) -> st.SearchStrategy[str]:
    """Lowercase hex of exactly ``size`` characters (digests, probe nonces)."""
    return st.text(alphabet="0123456789abcdef", min_size=size, max_size=size)


def pull_secret_layers() -> st.SearchStrategy[list[list[str] | None]]:
    """Three ``imagePullSecrets`` layers (global, context, task), each absent or a short list."""
    names = st.sampled_from(["a", "b", "c", "d"])
    return st.lists(st.one_of(st.none(), st.lists(names, max_size=3)), min_size=3, max_size=3)


def image_id_texts() -> st.SearchStrategy[str]:
    """``imageID`` values as runtimes report them (containerd, Docker, bare ids), mutated."""
    hexes = st.text(alphabet="0123456789abcdef", min_size=60, max_size=66)
    real = st.builds(
        lambda prefix, repo, hexa: f"{prefix}{repo}@sha256:{hexa}",
        st.sampled_from(["", "docker-pullable://", "docker://"]),
        st.sampled_from(["ghcr.io/x/y", "reg.example.com:5000/team/app", "docker.io/library/b"]),
        hexes,
    )
    return st.one_of(real, hexes.map(lambda h: f"sha256:{h}"), st.text(max_size=120))


def probe_observation_fields() -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments of ``preflight.probe_verdict.Observation``, every field varied."""
    return st.fixed_dictionaries(
        {
            "created": st.booleans(),
            "drift": st.lists(st.text(max_size=5), max_size=2).map(tuple),
            "account_changed": st.booleans(),
            "phase": st.sampled_from(["", "Pending", "Running", "Succeeded", "Failed", "Unknown"]),
            "permanent": st.sampled_from(["", "IMAGE_PULL_AUTH: ErrImagePull: 401"]),
            "image_id": st.one_of(st.just(f"ghcr.io/x/y@{PROBE_DIGEST}"), image_id_texts()),
            "deadline_expired": st.booleans(),
            "vanished": st.booleans(),
            "cleanup": st.sampled_from(list(ProbeCleanup)),
        }
    )


_ARG_TEXT = st.text(st.characters(exclude_characters="\x00"), max_size=12)  # argv holds no NUL
_KEY_TEXT = _ARG_TEXT.map(str.strip).filter(lambda k: bool(k) and "=" not in k)
_ENV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


def _option_value(flag: submitflags.Flag) -> st.SearchStrategy[Any]:
    """A value of ``flag``'s field the CLI can spell (the default included)."""
    low = int(flag.minimum or 0)
    by_kind: dict[Kind, st.SearchStrategy[Any]] = {
        Kind.SWITCH: st.booleans(),
        Kind.SWITCH_OFF: st.booleans(),
        Kind.TOGGLE: st.booleans(),
        # an empty or blank text, a nan or an infinity is a usage error (cli.optiontypes)
        Kind.TEXT: st.none() | _ARG_TEXT.filter(str.strip),
        Kind.DECISION: st.sampled_from(["", "promote_checkpoint", "promote", "loop_back"]),
        Kind.PATH: st.none() | _ARG_TEXT.filter(str.strip).map(Path),
        Kind.INT: st.integers(min_value=low, max_value=10**6),
        Kind.FLOAT: st.floats(min_value=float(low), allow_nan=False, allow_infinity=False),
        Kind.MULTI: st.lists(_ARG_TEXT, max_size=3).map(tuple),
        Kind.NAMES: st.lists(_ENV_NAMES, max_size=3, unique=True).map(tuple),
        Kind.PAIRS: st.lists(
            st.tuples(_KEY_TEXT, _ARG_TEXT.map(str.strip).filter(bool)), max_size=3
        ).map(tuple),
        Kind.MAPPING: st.dictionaries(_KEY_TEXT, _ARG_TEXT, max_size=3),
    }
    return st.just(flag.default) | by_kind[flag.kind]


@st.composite
def submit_option_fields(draw: st.DrawFn) -> dict[str, Any]:
    """Every option the resume command carries, each at its default or another value."""
    return {
        flag.field: draw(_option_value(flag))
        for flag in submitflags.OPTIONS
        if flag.resume is submitflags.Resume.CARRY
    }


_MISSING_KINDS = st.sampled_from(["absent"] * 4 + ["unknown", "RUNNING", "PENDING", "STARTING"])


def missing_sequences() -> st.SearchStrategy[list[tuple[float, str, str]]]:
    """One watched job's reads ``(seconds since the last, kind, lookup answer)``: kind is
    ``absent`` (missing from a readable answer), ``unknown`` (unreadable) or a live status;
    the answer is what an exact-name lookup would say if asked after that read."""
    return st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=400.0),
            _MISSING_KINDS,
            st.sampled_from(["found", "absent", "unknown"]),
        ),
        max_size=40,
    )


# -- image pull failures (kubernetes.md §6.3 rows 1-3 and 12; issue 15) -----------------------

# written out from kubernetes.md §6.3 and issue 15, not imported: a token the classifier
# drops must fail the property
PERMANENT_PULL_TOKENS = (
    "401",
    "403",
    "unauthorized",
    "forbidden",
    "denied",
    "authentication required",
    "not found",
    "manifest unknown",
    "404",
    "invalid reference",
)
_PULL_PREFIX = (
    'rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/'
    'team/app:v1": '
)
TRANSIENT_PULL_TEXTS = (
    'failed to do request: Head "https://registry.example.com/v2/team/app/manifests/v1": '
    "dial tcp 203.0.113.7:443: i/o timeout",
    'failed to do request: Head "https://registry.example.com/v2/team/app/manifests/v1": '
    "dial tcp 203.0.113.7:443: connect: connection refused",
    "unexpected status from HEAD request to https://registry.example.com/v2/team/app/"
    "manifests/v1: 503 Service Unavailable",
    "unexpected status from HEAD request to https://registry.example.com/v2/team/app/"
    "manifests/v1: 502 Bad Gateway",
    "received unexpected HTTP status: 500 Internal Server Error",
    "unexpected status code 504 Gateway Timeout",
    "toomanyrequests: You have reached your pull rate limit. You may increase the limit by "
    "authenticating and upgrading: https://www.docker.com/increase-rate-limit",
    "unexpected status from GET request to https://registry.example.com/token: "
    "429 Too Many Requests",
    "net/http: TLS handshake timeout",
    "context deadline exceeded",
)
_SEPARATORS = st.sampled_from([" ", ": ", "\n", " (", ") ", ", ", '"'])


def _any_case(draw: st.DrawFn, text: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c.lower() for c in text)


@st.composite
def permanent_pull_messages(draw: st.DrawFn) -> str:
    """A pull message holding one permanent token, in any case, anywhere in any text."""
    token = _any_case(draw, draw(st.sampled_from(PERMANENT_PULL_TOKENS)))
    before = draw(st.sampled_from(["", _PULL_PREFIX]) | st.text(max_size=60))
    after = draw(st.text(max_size=60))
    return f"{before}{draw(_SEPARATORS)}{token}{draw(_SEPARATORS)}{after}"


@st.composite
def transient_pull_messages(draw: st.DrawFn) -> str:
    """A pull failure that may pass (timeouts, refused connections, 5xx, 429), in any case."""
    text = draw(st.sampled_from(TRANSIENT_PULL_TEXTS))
    return draw(st.sampled_from(["", _PULL_PREFIX])) + _any_case(draw, text)


_ATTEMPT_RESULTS = st.sampled_from(list(outcome.AttemptResult))


@st.composite
def run_outcome_evidence(
    draw: st.DrawFn,
) -> tuple[list[str], list[outcome.JobEvidence], outcome.Stop, bool]:
    """A run's planned job names, the evidence of the jobs a driver took, how its walk
    stopped and whether it supervised: half the time a well-formed walk (a prefix of
    the plan, retries after failures), otherwise anything, with repeats, skips,
    unplanned names and any mix of attempt results."""
    planned = draw(st.lists(st.sampled_from(list("abcdefg")), min_size=1, max_size=5, unique=True))
    attempt = st.builds(outcome.Attempt, _ATTEMPT_RESULTS, st.none() | st.integers(1, 99))
    if draw(st.booleans()):
        taken = []
        for name in planned[: draw(st.integers(0, len(planned)))]:
            retries = [outcome.Attempt(outcome.AttemptResult.FAILED, 1)] * draw(st.integers(0, 2))
            last = draw(
                st.sampled_from([outcome.AttemptResult.SUCCEEDED] * 4 + list(outcome.AttemptResult))
            )
            taken.append(outcome.JobEvidence(name, (*retries, outcome.Attempt(last, 2))))
    else:
        names = st.sampled_from([*planned, "x", "y"])
        taken = draw(
            st.lists(
                st.builds(
                    outcome.JobEvidence,
                    names,
                    st.tuples(attempt) | st.lists(attempt, max_size=3).map(tuple),
                ),
                max_size=6,
            )
        )
    stop = draw(st.sampled_from(list(outcome.Stop)))
    return planned, taken, stop, draw(st.booleans())


_DIST_VERSIONS = {
    "skypilot": ("0.12.2", "0.12.3", "0.11.0"),
    "kubernetes": ("35.0.0", "34.1.0", "32.0.0", "36.0.0", "37.0.2", "19.0.0"),
    "fastapi": ("0.119.1", "0.115.0", "0.120.0", "0.165.0"),
    "click": ("8.1.8", "8.2.0", "8.0.4"),
}


@st.composite
def drift_observations(draw: st.DrawFn) -> drift.Observation:
    """A drift-gate observation; each distribution in or out of its pin, or missing."""
    versions = {
        name: draw(st.none() | st.sampled_from(choices)) for name, choices in _DIST_VERSIONS.items()
    }
    venv = drift.VenvObservation(
        draw(st.sampled_from(list(drift.VenvState))),
        draw(st.none() | st.sampled_from(["3.11.7", "3.12.1", "3.13.0", "3.8.10", "3.9"])),
        versions,
        draw(st.sampled_from(["", "/opt/venv"])),
    )
    server = draw(
        st.none()
        | st.builds(
            port.PortCheck,
            st.sampled_from([port.API_PORT, port.EXTRA_PORT]),
            st.sampled_from(list(port.Ownership)),
            st.none() | st.integers(1, 99999),
            st.none() | st.just("/home/other"),
            st.none() | st.just("npa-0123456789"),
        )
    )
    tokens = tuple(name for name in drift.STALE_TOKEN_VARS if draw(st.booleans()))
    return drift.Observation(venv, server, tokens)


JOB_STATUSES = (
    "PENDING",
    "SUBMITTED",
    "STARTING",
    "RUNNING",
    "RECOVERING",
    "WINDING_DOWN",
    "CANCELLING",
    "SUCCEEDED",
    "CANCELLED",
    "FAILED",
    "FAILED_SETUP",
    "FAILED_PRECHECKS",
    "FAILED_NO_RESOURCE",
    "FAILED_CONTROLLER",
)


@st.composite
def cancel_intents(draw: st.DrawFn) -> Any:
    """A journaled ``runs.resume.CancelIntent`` of any reason, spent or not, or None."""
    from npa_infra.runs import resume

    if draw(st.booleans()):
        return None
    reason = draw(st.sampled_from(list(resume.CancelReason)))
    return resume.CancelIntent(
        job_id=draw(st.integers(1, 10_000)),
        wave=draw(st.integers(0, 20)),
        attempt=draw(st.integers(1, 5)),
        reason=reason,
        code=draw(st.none() | st.sampled_from(["IMAGE_PULL_AUTH", "INSUFFICIENT_CPU"])),
        status=draw(st.none() | st.sampled_from(JOB_STATUSES)),
        budget="infrastructure_recoveries_left" if reason.relaunches else None,
        spent=draw(st.booleans()),
    )


@st.composite
def job_observations(draw: st.DrawFn) -> Any:
    """One read of a job: present with any status (or none), absent, or unknown."""
    from npa_infra.runs import resume

    presence = draw(st.sampled_from(list(resume.Presence)))
    if presence is resume.Presence.PRESENT:
        return resume.JobObservation(presence, draw(st.none() | st.sampled_from(JOB_STATUSES)))
    return resume.JobObservation(presence)


# -- the stack/project selection (npa_infra/projects/resolve.py; issue 16) -------------------
_ALIASES = ("dev", "prod", "team-a", "a.b", "x_1")


@st.composite
def project_resolutions(draw: st.DrawFn) -> Any:
    """One ``projects.resolve`` input: (request, entry, stack_exists, known).

    The project entry is present (bound to a stack, a context, or both), absent
    or unreadable; a stack of the alias's name exists or not; ``--stack`` and an
    explicit context are absent, equal to the binding or different from it.
    """
    from npa_infra.projects import record, resolve

    alias = draw(st.none() | st.sampled_from(_ALIASES))
    state = draw(st.sampled_from(list(resolve.EntryState)))
    bound_stack = draw(st.none() | st.sampled_from(("dev", "prod", alias or "dev")))
    bound_context = draw(st.none() | st.sampled_from(("kind-a", "kind-b")))
    entry = None
    if alias is not None:
        path = f"/home/u/.npa/projects/{alias}.yaml"
        project = record.Project(alias=alias, stack=bound_stack, context=bound_context)
        entry = resolve.Entry(
            state,
            path,
            project=project if state is resolve.EntryState.PRESENT else None,
            problem="not a mapping" if state is resolve.EntryState.UNREADABLE else "",
        )
    stack = draw(st.none() | st.sampled_from(("dev", "prod", alias or "dev", "other")))
    context = draw(st.none() | st.sampled_from(("kind-a", "kind-b")))
    known = resolve.Known(
        projects=tuple(draw(st.lists(st.sampled_from(_ALIASES), unique=True, max_size=3))),
        stacks=tuple(draw(st.lists(st.sampled_from(_ALIASES), unique=True, max_size=3))),
    )
    request = resolve.Request(stack=stack, project=alias, context=context)
    return request, entry, draw(st.booleans()), known


# -- npa cleanup: the leftovers planner (runs.leftovers) --------------------------------

_RUN_IDS = ("r1", "r2", "r3")
_STATE_DIRS = ("/h/skypilot-state/a", "/h/skypilot-state/b")


@st.composite
def leftover_worlds(draw: st.DrawFn) -> dict[str, Any]:
    """Caches, runs and state directories for ``runs.leftovers.plan``, drawn together."""
    from npa_infra.runs import leftovers

    state = st.sampled_from(_STATE_DIRS)
    run_id = st.sampled_from(_RUN_IDS)
    proof = st.sampled_from(list(leftovers.Proof))
    cache = st.one_of(
        st.builds(leftovers.CacheObservation, st.just(leftovers.CacheKind.RENDERED_YAML),
                  st.just("/h/rendered/x"), st.integers(0, 10**9), run_id=run_id, proof=proof),
        st.builds(leftovers.CacheObservation, st.just(leftovers.CacheKind.TASK_YAML),
                  st.just("/s/submissions/x"), st.integers(0, 10**9), run_id=run_id,
                  state_dir=state, proof=proof),
        st.builds(leftovers.CacheObservation,
                  st.sampled_from([leftovers.CacheKind.TICK_FILES, leftovers.CacheKind.STATE_DIR]),
                  state, st.integers(0, 10**9), state_dir=state, proof=proof),
        st.builds(leftovers.CacheObservation,
                  st.sampled_from([leftovers.CacheKind.PROBE_CACHE, leftovers.CacheKind.GATE_CACHE,
                                   leftovers.CacheKind.SKYPILOT_VENV]),
                  st.just("/h/cache/x"), st.integers(0, 10**9), proof=proof),
    )  # fmt: skip
    run = st.builds(
        leftovers.RunObservation,
        run_id,
        st.one_of(st.none(), state),
        live=st.booleans(),
        inflight=st.booleans(),
        locked=st.booleans(),
    )
    observed = st.builds(
        leftovers.StateObservation,
        state,
        st.sampled_from(list(leftovers.Controller)),
        st.one_of(st.none(), st.just("dev")),
        st.booleans(),
        st.lists(st.sampled_from(("r1", "r2-00-train", "r3-a2", "r10", "other")), max_size=3).map(
            tuple
        ),
    )
    return {
        "caches": draw(st.lists(cache, max_size=8)),
        "runs": draw(st.lists(run, max_size=5)),
        "states": draw(st.lists(observed, max_size=2, unique_by=lambda s: s.path)),
        "bootstrap_locked": draw(st.booleans()),
    }


@st.composite
def leftover_scopes(draw: st.DrawFn) -> Any:
    """A selection's ``runs.leftovers.Scope`` over ``leftover_worlds``' directories and runs:
    some state directories, its runs, and other selections' runs (disjoint from its own)."""
    from npa_infra.runs import leftovers

    mine = draw(st.frozensets(st.sampled_from(_RUN_IDS)))
    return leftovers.Scope(
        draw(st.frozensets(st.sampled_from(_STATE_DIRS))),
        mine,
        draw(st.frozensets(st.sampled_from(_RUN_IDS))) - mine,
    )


_DRAIN_NAMESPACES = ("team-a", "team-b", "kube-system")
_DRAIN_LABELS = st.dictionaries(
    st.sampled_from(("app", "tier")), st.sampled_from(("a", "b")), max_size=2
)


@st.composite
def drain_worlds(draw: st.DrawFn) -> dict[str, Any]:
    """A cluster for the drain preview (kubernetes.md §7): ``nodes`` (names), ``pods``
    (``NodePod``: ready or not, any phase, on a node of the cluster or another, some
    DaemonSet-owned, mirror or terminating) and ``budgets`` (``DisruptionBudget``:
    null, empty or label/expression selectors, int or percentage min/max, any eviction
    policy, a status written for this generation, an older one or none)."""
    from npa_infra.kube.models import (
        BudgetStatus,
        DisruptionBudget,
        LabelSelector,
        NodePod,
        SelectorRequirement,
    )

    nodes = draw(st.lists(st.sampled_from(("n1", "n2", "n3")), min_size=1, max_size=3, unique=True))
    pod = st.builds(
        NodePod,
        name=st.text("abcdefgh", min_size=1, max_size=4),
        namespace=st.sampled_from(_DRAIN_NAMESPACES),
        node_name=st.sampled_from(("n1", "n2", "n3", "elsewhere")),
        labels=_DRAIN_LABELS.map(lambda d: tuple(sorted(d.items()))),
        phase=st.sampled_from(("Running", "Pending", "Succeeded", "Failed")),
        ready=st.booleans(),
        deleting=st.booleans(),
        daemonset=st.booleans(),
        mirror=st.booleans(),
    )
    requirement = st.builds(
        SelectorRequirement,
        st.sampled_from(("app", "tier")),
        st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")),
        st.lists(st.sampled_from(("a", "b")), max_size=2).map(tuple),
    )
    selector = st.one_of(
        st.none(),
        st.builds(
            LabelSelector,
            _DRAIN_LABELS.map(lambda d: tuple(sorted(d.items()))),
            st.lists(requirement, max_size=2).map(tuple),
        ),
    )
    amount = st.one_of(st.none(), st.integers(0, 4), st.sampled_from(("0%", "50%", "100%")))
    count = st.integers(0, 5)
    status = st.one_of(
        st.none(),
        st.builds(
            BudgetStatus, count, count, count, count, st.one_of(st.none(), st.integers(1, 3))
        ),
    )
    budget = st.builds(
        DisruptionBudget,
        name=st.sampled_from(("web", "db", "coredns", "metrics-server")),
        namespace=st.sampled_from(_DRAIN_NAMESPACES),
        selector=selector,
        min_available=amount,
        max_unavailable=amount,
        unhealthy_pod_eviction_policy=st.sampled_from((None, "IfHealthyBudget", "AlwaysAllow")),
        generation=st.integers(1, 3),
        status=status,
    )
    budgets = draw(st.lists(budget, max_size=5, unique_by=lambda b: (b.namespace, b.name)))
    return {"nodes": nodes, "pods": draw(st.lists(pod, max_size=10)), "budgets": budgets}


@st.composite
def controller_gate_inputs(draw: st.DrawFn) -> Any:
    """What the controller's teardown gate decides on (``runs.controllergate.GateInput``):
    any queue observation (or none since the last down), jobs of several users in
    every SkyPilot status, any last ``sky down`` answer, the deadline, ``--yes`` and the
    launches recorded in flight (none, some, or records that cannot be listed)."""
    from npa_infra.runs import controllergate as gate

    job = st.builds(
        gate.ManagedJob,
        st.integers(1, 40),
        st.sampled_from(("train", "eval", "npa-run-a")),
        st.sampled_from(("tester", "alice", "bob")),
        st.sampled_from(JOB_STATUSES),
    )
    kind = draw(st.sampled_from(list(gate.QueueKind)))
    jobs = tuple(draw(st.lists(job, max_size=5))) if kind is gate.QueueKind.JOBS else ()
    observed = gate.QueueObservation(kind, jobs, draw(st.sampled_from(("", "detail"))))
    return gate.GateInput(
        queue=draw(st.one_of(st.none(), st.just(observed))),
        last_down=draw(st.sampled_from(list(gate.DownKind))),
        down_detail=draw(st.sampled_from(("", "RuntimeError: boom"))),
        deadline_passed=draw(st.booleans()),
        confirmed=draw(st.booleans()),
        launches=draw(
            st.none()
            | st.lists(
                st.builds(
                    gate.PendingLaunch,
                    st.sampled_from(("r1", "r2")),
                    st.just("r1-00-train"),
                    st.sampled_from(("/home/a/.npa", "?")),
                ),
                max_size=2,
            ).map(tuple)
        ),
    )


# -- live SkyPilot output (npa_infra/runs/skyoutput.py; issue 17) ------------------------------
# Recorded known-failure lines (skypilot-0.12.md §8.1, §11), each holding one signature.
SKY_KNOWN_LINES: tuple[tuple[str, str], ...] = (
    (
        "sky.exceptions.InvalidCloudConfigs: Invalid pod_config. Details: Validation error in "
        "metadata.labels: No module named 'kubernetes.client.models.dict[str, str]'",
        "kubernetes_client_pod_config",
    ),
    (
        "TypeError: FastAPI.__init__() got an unexpected keyword argument 'prefix'",
        "fastapi_server_crash",
    ),
    (
        "sky.exceptions.APIVersionMismatchError: Client and local API server version mismatch",
        "foreign_api_server",
    ),
    (
        "nebius.aio.service_error.RequestError: PermissionDenied: access to the resource denied",
        "stale_nebius_token",
    ),
    ("grpc status StatusCode.UNAUTHENTICATED: token expired", "stale_nebius_token"),
)
# Ordinary launch output and near misses that name no known failure.
SKY_ORDINARY_LINES: tuple[str, ...] = (
    "YAML to run: /tmp/npa/task.yaml",
    "Launching a managed job 'npa-run-1'. Proceed? [Y/n]:",
    "Submitted sky.jobs.launch request: 9b8c63a0-51f6-4d0e-9a43-3c3e1f0a2b7d",
    "\x1b[2m⚙︎ Launching managed job on Kubernetes\x1b[0m",
    "sky.exceptions.InvalidCloudConfigs: Invalid pod_config. Details: Invalid field: spec.foo",
    "PermissionError: [Errno 13] Permission denied: '/tmp/x'",
    "(401) Unauthorized",
    "Check the request's log with: sky api logs 9b8c63a0",
    "",
)


@st.composite
def sky_output_fragments(draw: st.DrawFn) -> list[tuple[str, str | None]]:
    """Lines of one launch's output, each with the known cause it shows (or None)."""
    known = st.sampled_from(SKY_KNOWN_LINES).map(lambda pair: (pair[0], pair[1]))
    ordinary = st.sampled_from(SKY_ORDINARY_LINES).map(lambda line: (line, None))
    return draw(st.lists(st.one_of(ordinary, ordinary, known), max_size=8))


# -- sky check kubernetes (npa_infra/skypilot/checkoutput.py; issue 17) ------------------------
# Lines of 0.12.2's `sky check kubernetes` (real/check_kubernetes_tools_missing.txt,
# sky/check.py) and near misses.
SKY_CHECK_LINES: tuple[str, ...] = (
    "Checking credentials to enable infra for SkyPilot.",
    "\x1b[2m  Kubernetes: disabled \x1b[0m\x1b[0m",
    "\x1b[32m\x1b[22m  Kubernetes: enabled [compute]\x1b[0m",
    "    Reason [compute]: `socat` is required to setup Kubernetes cloud and it is not installed. ",
    "    Reason [compute]:     ",
    "        Allowed contexts:",
    "    \x1b[2m└── \x1b[0mnpa-ctx: \x1b[32menabled.\x1b[0m\x1b[0m",
    "        \x1b[2m└── \x1b[0mnpa-ctx: \x1b[91mdisabled.\x1b[0m\x1b[2m Reason: (401)\x1b[0m",
    "    ├── other",
    "\x1b[32m🎉 Enabled infra 🎉\x1b[0m",
    "  \x1b[32mKubernetes [compute]\x1b[0m",
    "  No infra to check/enabled.",
    "Using SkyPilot API server: http://127.0.0.1:46580",
    "Using SkyPilot API server: https://sky.example.com",
    "Using SkyPilot API server:",
    "Kubernetes: enabledness",
    "sky.exceptions.ApiServerConnectionError: Could not connect to SkyPilot API server",
    "",
)


@st.composite
def sky_check_results(draw: st.DrawFn) -> CommandResult:
    """A finished ``sky check kubernetes``: recorded lines and arbitrary text, any exit."""
    piece = st.sampled_from(SKY_CHECK_LINES) | st.text(max_size=30)
    stream = st.lists(piece, max_size=8).map("\n".join)
    return CommandResult(
        argv=("sky", "check", "kubernetes"),
        returncode=draw(st.sampled_from((0, 0, 0, 1, 2, 127)) | st.integers()),
        stdout=draw(stream),
        stderr=draw(st.sampled_from(("", "")) | stream),
        timed_out=draw(st.booleans()),
    )


# -- workflow logs / workflow list (npa_infra/runs/logtargets.py, listing.py; issue 17) ---------
_LIST_STATUSES = (
    "LAUNCHING",
    "SUBMITTED",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
    "RECOVERY_REQUIRED",
    "ROLLED_BACK",
    "PLANNED",
)


@st.composite
def attempt_refs(draw: st.DrawFn) -> list[Any]:
    """A run's journaled attempts: waves 0..n with consecutive attempts from 1, each with an
    adopted job id or none (never launched or not reconciled)."""
    from npa_infra.runs.logtargets import AttemptRef

    refs: list[AttemptRef] = []
    job_id = 0
    for wave in range(draw(st.integers(0, 4))):
        for attempt in range(1, draw(st.integers(1, 3)) + 1):
            job_id += 1
            adopted = draw(st.booleans() | st.just(True))
            name = f"run-{wave:02d}-a{attempt}"
            refs.append(AttemptRef(wave, attempt, name, job_id if adopted else None))
    return draw(st.permutations(refs))


@st.composite
def run_entries(draw: st.DrawFn) -> list[Any]:
    """Journal runs and plan-only run ids (some sharing an id with a run), any status, any
    times (clocks may step back), for ``runs.listing.rows``."""
    import dataclasses

    from npa_infra.runs.listing import RunEntry

    ids = draw(st.lists(st.sampled_from([f"r-{i}" for i in range(12)]), unique=True, max_size=10))
    times = st.floats(1_700_000_000.0, 1_700_100_000.0, allow_nan=False)
    entries: list[RunEntry] = []
    for run_id in ids:
        plan_only = draw(st.booleans())
        created = draw(times)
        entries.append(
            RunEntry(
                run_id=run_id,
                stack=draw(st.sampled_from((None, "", "dev", "prod"))),
                workflow="wf",
                mode=draw(st.sampled_from(("one-shot", "runtime", "raw"))),
                status="PLANNED" if plan_only else draw(st.sampled_from(_LIST_STATUSES[:-1])),
                created_at=created,
                updated_at=created + draw(st.floats(0.0, 5_000.0)),
                waves=draw(st.integers(0, 4)),
                job_ids=tuple(draw(st.lists(st.integers(1, 50), max_size=4))),
                plan_only=plan_only,
            )
        )
        if not plan_only and draw(st.booleans()):  # a plan of the same id, from before the run
            earlier = created - 1.0
            plan = RunEntry(run_id, None, "wf", "one-shot", "PLANNED", earlier, earlier)
            entries.append(dataclasses.replace(plan, plan_only=True))
    return draw(st.permutations(entries))


# How a run's lock file reads (journal.lock.holder_state): no file, released (empty), held
# by this live process, by a process that has exited, or recorded on another host.
LOCK_HOLDERS = ("none", "released", "alive", "dead", "other_host")


@st.composite
def journal_run_states(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Runs as a journal can hold them: any status (a legacy text too), any lock holder,
    adopted job ids or none, some with a plan-only twin, plus plan-only run ids, for the
    agreement of ``status``, ``list`` and the SDK (``runs.runview``)."""
    from npa_infra.runs.lifecycle import RunStatus

    statuses = [s.value for s in RunStatus if s is not RunStatus.PLANNED] + ["RUNNING"]
    ids = draw(st.lists(st.sampled_from([f"s-{i}" for i in range(8)]), unique=True, max_size=6))
    runs = []
    for index, run_id in enumerate(ids):
        plan_only = draw(st.booleans()) and draw(st.booleans())
        runs.append(
            {
                "run_id": run_id,
                "plan_only": plan_only,
                "status": "PLANNED" if plan_only else draw(st.sampled_from(statuses)),
                "stack": draw(st.sampled_from((None, "dev"))),
                "holder": draw(st.sampled_from(LOCK_HOLDERS)),
                "job_ids": draw(st.lists(st.integers(1, 99), max_size=2, unique=True)),
                "planned_too": not plan_only and draw(st.booleans()),
                "created_at": 1_700_000_000.0 + index,
            }
        )
    return runs


def graph_labels() -> st.SearchStrategy[str]:
    """Label text for the plan graph emitters: any characters, syntax of both formats often."""
    specials = ['"', "#", "&", "<", ">", "|", ";", "%", "`", "\\", "[", "]", "{", "}", "\n", "\t"]
    syntax = st.sampled_from([*specials, "<br>", "#34;", "&#38;", "\\n", "end"])
    return st.lists(st.one_of(st.text(max_size=6), syntax), max_size=8).map("".join)


_DUPLICATE_KEYS = st.from_regex(r"k[a-z0-9_]{0,5}", fullmatch=True)
_DuplicateCase = tuple[str, tuple[str, ...], int, int, int]


def _mapping_paths(node: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for key, value in node.items():
        if isinstance(value, dict):
            paths += _mapping_paths(value, (*prefix, key))
    return paths


@st.composite
def duplicate_key_documents(draw: st.DrawFn) -> _DuplicateCase:
    """Block YAML of nested mappings in which one mapping writes one of its keys twice.

    Returns ``(text, path of the repeated key, line of its first definition, line
    and column of the second)``; the second comes after the mapping's other entries.
    """
    tree = draw(
        st.dictionaries(
            _DUPLICATE_KEYS,
            st.recursive(
                st.integers(0, 99),
                lambda inner: st.dictionaries(_DUPLICATE_KEYS, inner, min_size=1, max_size=4),
                max_leaves=10,
            ),
            min_size=1,
            max_size=5,
        )
    )
    target = draw(st.sampled_from(_mapping_paths(tree)))
    mapping: dict[str, Any] = tree
    for part in target:
        mapping = mapping[part]
    key = draw(st.sampled_from(sorted(mapping)))
    lines: list[str] = []
    found: dict[str, int] = {}

    def emit(node: dict[str, Any], path: tuple[str, ...]) -> None:
        pad = "  " * len(path)
        for name, value in node.items():
            if path == target and name == key:
                found["first"] = len(lines) + 1
            lines.append(f"{pad}{name}:" if isinstance(value, dict) else f"{pad}{name}: {value}")
            if isinstance(value, dict):
                emit(value, (*path, name))
        if path == target:
            found["second"] = len(lines) + 1
            lines.append(f"{pad}{key}: repeated")

    emit(tree, ())
    column = 2 * len(target) + 1
    return "\n".join(lines) + "\n", (*target, key), found["first"], found["second"], column


# -- runtime decision sets (issue 19: a run's routing memo) --------------------------------

DECISION_VALUES = ("promote", "promote_checkpoint", "loop_back", "loop_back_to_inner_loop")


def decision_sets(keys: list[str]) -> st.SearchStrategy[dict[str, str]]:
    """Decisions read so far: any subset of ``keys``, each with any (alias of a) decision."""
    return st.dictionaries(
        st.sampled_from(keys), st.sampled_from(DECISION_VALUES), max_size=len(keys)
    )


@st.composite
def readiness_answers(draw: st.DrawFn) -> tuple[list[Any], float]:
    """Readiness answers (oldest first, ``kube.readywindow.Answer``) and a ``now`` after them."""
    from npa_infra.kube.readywindow import Answer

    at = draw(st.floats(min_value=0.0, max_value=100.0))
    answers = []
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        at += draw(st.sampled_from([0.0, 0.001, 2.5, 4.999, 5.0, 5.001, 9.999, 10.0, 15.0, 16.0]))
        answers.append(Answer(at, draw(st.sampled_from([True, True, True, False]))))
    now = at + draw(st.sampled_from([0.0, 0.001, 1.0, 4.999, 5.0, 5.001, 30.0]))
    return answers, now


# Printable ASCII and line breaks (libyaml's fast path), now and then a character it
# escapes differently from PyYAML (a tab, a carriage return, an astral one).
_YAML_CHARS = st.sampled_from(
    [chr(c) for c in range(32, 127)] + ["\n"] * 4 + ["\t", "\r", "\U0001f600"]
)
_YAML_TEXT = st.text(alphabet=_YAML_CHARS, max_size=120)
_YAML_LINES = st.lists(st.text(alphabet=_YAML_CHARS, max_size=30), max_size=5).map("\n".join)


def yaml_documents() -> st.SearchStrategy[dict[str, Any]]:
    """Task-like documents for the emitter comparison (``render.documents``)."""
    scalars = st.one_of(
        _YAML_TEXT, _YAML_LINES, st.integers(), st.floats(), st.booleans(), st.none()
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.text(alphabet=_YAML_CHARS, max_size=12), inner, max_size=3),
        ),
        max_leaves=10,
    )
    return st.dictionaries(st.text(alphabet=_YAML_CHARS, max_size=16), values, max_size=5)


# -- job names (plan.waves.job_name, issue 24) ----------------------------------------------
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")  # cli.md §0 "Run ids"
_ID_CHARS = "ab0-_.AZ"


@st.composite
def run_ids(draw: st.DrawFn) -> str:
    """Valid run ids from a small alphabet: short, or around the 60-character cut with a
    repetitive body, so lowercasing, sanitising and cutting collide often."""
    head = draw(st.sampled_from("aAbz0Z9"))
    tail = draw(st.text(alphabet=_ID_CHARS, max_size=10))
    if draw(st.booleans()):
        body = (draw(st.sampled_from(["a", "r", "ab-", "x_"])) * 70)[: draw(st.integers(40, 70))]
        tail = body + tail
    return (head + tail)[:96]


def _resplit(draw: st.DrawFn, shown: str) -> tuple[str, int, str] | None:
    """Another ``(run, index, wave name)`` whose ``<run>-<WW>-<wave>`` reads like ``shown``."""
    parts = shown.split("-")
    cuts = [k for k in range(1, len(parts) - 1) if parts[k].isdigit() and len(parts[k]) < 5]
    if not cuts:
        return None
    k = draw(st.sampled_from(cuts))
    run, rest = "-".join(parts[:k]), "-".join(parts[k + 1 :])
    return (run, int(parts[k]), rest) if RUN_ID.match(run) and rest else None


@st.composite
def run_id_variants(draw: st.DrawFn, run_id: str) -> str:
    """A valid run id that sanitising, the cut, an ``-aN`` or hash-shaped tail, or copying
    ``run_id``'s own job name could confuse with ``run_id`` (or any other valid id)."""
    from npa_infra.plan import waves

    how = draw(st.sampled_from(["case", "swap", "tail", "attempt", "hash", "job", "any"]))
    i = draw(st.integers(0, len(run_id) - 1))
    candidate = {
        "case": run_id[:i] + run_id[i].swapcase() + run_id[i + 1 :],
        "swap": run_id[:i] + draw(st.sampled_from("-_.a")) + run_id[i + 1 :],
        "tail": run_id[: draw(st.integers(1, 61))] + draw(st.text(alphabet=_ID_CHARS, max_size=6)),
        "attempt": f"{run_id}-a{draw(st.integers(2, 12))}",
        "hash": f"{run_id}-{draw(st.text(alphabet='0123456789abcdef', min_size=10, max_size=10))}",
        "job": waves.job_name(run_id),
        "any": draw(run_ids()),
    }[how][:96]
    return candidate if RUN_ID.match(candidate) else draw(run_ids())


_WAVE_NAMES = st.text(alphabet="ab0-_.B 1", min_size=1, max_size=24) | st.sampled_from(
    ["train", "eval-01-x", "grp-b2", "x-a3", "stage-12", "00-x", "Stage.Seven"]
)


@st.composite
def wave_identities(draw: st.DrawFn, run_id: str | None = None) -> tuple[str, int, str, int | None]:
    """``(run id, wave index, wave name, batch)`` of one runtime job; now and then a re-split
    of another identity's ``<run>-<WW>-<wave>`` text, which reads the same."""
    run = run_id if run_id is not None else draw(run_ids())
    index = draw(st.integers(0, 12) | st.integers(0, 1200))
    name = draw(_WAVE_NAMES)
    batch = draw(st.none() | st.integers(1, 12))
    if run_id is None and draw(st.integers(0, 3)) == 0:
        other = _resplit(draw, f"{run}-{index:02d}-{name}")
        if other is not None:
            run, index, name = other
    return run, index, name, batch


attempts = st.integers(1, 3) | st.integers(1, 1000)
