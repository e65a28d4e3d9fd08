"""``npa configure`` through the real typer app (issue 17).

Flags, prompts (CliRunner input), ``--no-input``, updates, ``--show`` and the two
credential stores; a canary value is asserted absent from every output and from
every file but the 0600 store. The stack store runs the real ``StackRunner``
over a ``ReplayPulumiCommand`` that records the argv and what the child read on
stdin, and writes the encrypted key into the stack file as the CLI would.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from pulumi import automation as auto
from typer.testing import CliRunner, Result

from npa_infra.cli.main import app
from npa_infra.projects import store
from npa_infra.stack.runner import RunnerSettings, StackRunner
from npa_infra.testing.pulumi import Call, ReplayPulumiCommand
from npa_infra.workflow.target.services import Services

CANARY = "canary-5ecret-77c1"
REPO = Path(__file__).resolve().parents[3]
Invoke = Callable[..., Result]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root with stack dev (cwd), an empty npa home, no pulumi on PATH."""
    project = tmp_path / "root"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    (project / "stacks" / "Pulumi.dev.yaml").write_text(
        "config:\n  npa-infra:context: kind-dev\n  npa-infra:namespace: ns-dev\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(project)
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    for name in ("HF_TOKEN", "NGC_API_KEY", "NPA_DEBUG", "NPA_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    return project


def _npa(services: Services | None = None) -> Invoke:
    runner = CliRunner()

    def invoke(*args: object, input: str | None = None) -> Result:
        return runner.invoke(
            app, [*map(str, args)], input=input, obj=services or Services(), catch_exceptions=False
        )

    return invoke


def _home() -> Path:
    return Path(os.environ["NPA_HOME"])


def _no_canary_outside_store(result: Result, store_file: Path | None) -> None:
    assert CANARY not in result.stdout
    assert CANARY not in result.stderr
    for path in _home().rglob("*"):
        if path.is_file() and path != store_file:
            assert CANARY not in path.read_text(encoding="utf-8", errors="replace"), path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- flags ------------------------------------------------------------------------------------
def test_configure_flags_context_project_created_0600_store_names_only(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", CANARY)

    result = _npa()(
        "configure", "-p", "lab", "--context", "kind-lab", "--namespace", "ml",
        "--credential", "HF_TOKEN", "--no-input", "--json",
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "created"
    assert (doc["alias"], doc["stack"], doc["context"], doc["namespace"]) == (
        "lab", None, "kind-lab", "ml",
    )  # fmt: skip
    assert doc["release_namespace"] == "ghcr.io/nebius/nebius-physical-ai"
    stored = _home() / "credentials" / "projects" / "lab.env"
    assert doc["credentials"] == [
        {"name": "HF_TOKEN", "store": "file", "location": str(stored), "input": "environment"}
    ]
    assert _mode(stored) == 0o600
    assert _mode(stored.parent) == 0o700
    assert stored.read_text(encoding="utf-8") == f"HF_TOKEN={CANARY}\n"
    _no_canary_outside_store(result, stored)


def test_configure_credential_value_on_command_line_refused_nothing_stored(root: Path) -> None:
    result = _npa()(
        "configure", "-p", "lab", "--context", "c", "--credential", f"HF_TOKEN={CANARY}"
    )

    assert result.exit_code != 0
    assert "Error:" in result.stderr and "ps" in result.stderr
    assert CANARY not in result.stderr + result.stdout
    assert not (_home() / "projects" / "lab.yaml").exists()


def test_configure_credential_from_file_and_stdin_read_never_echoed(
    root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "token"
    secret.write_text(CANARY + "\n", encoding="utf-8")

    from_file = _npa()(
        "configure", "-p", "lab", "--context", "c", "--credential", f"HF_TOKEN=@{secret}", "--json",
    )  # fmt: skip
    from_stdin = _npa()(
        "configure", "-p", "lab", "--credential", "NGC_API_KEY=@-", "--json", input=CANARY + "x"
    )

    assert from_file.exit_code == 0, from_file.stderr
    assert from_stdin.exit_code == 0, from_stdin.stderr
    rows = {r["name"]: r["input"] for r in json.loads(from_stdin.stdout)["credentials"]}
    assert rows == {"HF_TOKEN": None, "NGC_API_KEY": "stdin"}
    stored = _home() / "credentials" / "projects" / "lab.env"
    assert stored.read_text(encoding="utf-8") == f"HF_TOKEN={CANARY}\nNGC_API_KEY={CANARY}x\n"
    _no_canary_outside_store(from_stdin, stored)


# -- prompts ----------------------------------------------------------------------------------
def test_configure_prompts_walk_fields_secret_hidden(root: Path) -> None:
    # alias, stack (empty: a context), context, namespace, state dir, release namespace,
    # one credential and its hidden value, then done
    answers = ["lab", "", "kind-lab", "ml", "", "reg.example.com/team", "HF_TOKEN", CANARY, ""]

    result = _npa()("configure", input="\n".join(answers) + "\n")

    assert result.exit_code == 0, result.stderr
    entry = store.load("lab", os.environ).project
    assert entry is not None
    assert (entry.context, entry.namespace, entry.state_dir) == ("kind-lab", "ml", None)
    assert entry.release_namespace == "reg.example.com/team"
    assert "Kubernetes context" in result.stderr  # prompts go to stderr
    assert "credential HF_TOKEN: file" in result.stdout
    _no_canary_outside_store(result, _home() / "credentials" / "projects" / "lab.env")


def test_configure_env_name_unset_prompts_hidden_value(root: Path) -> None:
    result = _npa()(
        "configure", "-p", "lab", "--context", "c", "--credential", "HF_TOKEN", input=CANARY + "\n"
    )

    assert result.exit_code == 0, result.stderr
    assert "(read from prompt)" in result.stdout
    _no_canary_outside_store(result, _home() / "credentials" / "projects" / "lab.env")


@pytest.mark.parametrize(
    "argv",
    [
        ("configure", "--context", "c"),  # no alias
        ("configure", "-p", "lab", "--context", "c", "--credential", "HF_TOKEN"),  # unset name
    ],
    ids=["alias", "credential"],
)
def test_configure_no_input_missing_value_fails_without_prompting(
    root: Path, argv: tuple[str, ...]
) -> None:
    result = _npa()(*argv, "--no-input", input="would-be-read\n")

    assert result.exit_code != 0
    assert "Error:" in result.stderr and "prompting is off" in result.stderr
    assert not (_home() / "projects").exists()


def test_configure_end_of_input_is_an_error_not_a_traceback(root: Path) -> None:
    result = _npa()("configure", input="")

    assert result.exit_code != 0
    assert "Error: Project alias: no answer" in result.stderr


# -- updates ----------------------------------------------------------------------------------
def test_configure_update_keeps_other_fields_then_unchanged(root: Path) -> None:
    npa = _npa()
    npa("configure", "-p", "lab", "--context", "kind-lab", "--namespace", "ml", "--no-input")

    updated = npa("configure", "-p", "lab", "--release-namespace", "reg.example.com/t/", "--json")
    again = npa("configure", "-p", "lab", "--release-namespace", "reg.example.com/t", "--json")

    assert json.loads(updated.stdout)["status"] == "updated"
    doc = json.loads(again.stdout)
    assert doc["status"] == "unchanged"
    assert (doc["context"], doc["namespace"], doc["release_namespace"]) == (
        "kind-lab", "ml", "reg.example.com/t",
    )  # fmt: skip


def test_configure_stack_and_context_together_refused(root: Path) -> None:
    result = _npa()("configure", "-p", "lab", "-s", "dev", "--context", "c", "--json")

    assert result.exit_code != 0
    assert "two bindings" in result.stderr
    assert not (_home() / "projects" / "lab.yaml").exists()


def test_configure_unknown_stack_refused_listing_known(root: Path) -> None:
    result = _npa()("configure", "-p", "lab", "-s", "nope", "--no-input")

    assert result.exit_code == 1
    assert "stacks: dev" in result.stderr


# -- --show -----------------------------------------------------------------------------------
def test_configure_show_names_and_places_never_values(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", CANARY)
    npa = _npa()
    npa("configure", "-p", "lab", "--context", "c", "--credential", "HF_TOKEN", "--no-input")

    text = npa("configure", "--show")
    one = npa("configure", "--show", "-p", "lab", "--json")

    assert text.exit_code == one.exit_code == 0
    assert "credential HF_TOKEN: file" in text.stdout
    doc = json.loads(one.stdout)
    assert doc["status"] == "ok"
    assert [(r["name"], r["store"]) for r in doc["projects"][0]["credentials"]] == [
        ("HF_TOKEN", "file")
    ]
    for result in (text, one):
        _no_canary_outside_store(result, _home() / "credentials" / "projects" / "lab.env")


def test_configure_show_unknown_project_refused(root: Path) -> None:
    result = _npa()("configure", "--show", "-p", "ghost")

    assert result.exit_code == 1
    assert "no project ghost" in result.stderr


# -- the stack store --------------------------------------------------------------------------
def test_configure_stack_store_without_pulumi_exit_3_offers_file_store(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", CANARY)

    result = _npa()("configure", "-p", "dev", "--credential", "HF_TOKEN", "--no-input")
    fallback = _npa()(
        "configure", "-p", "dev", "--credential", "HF_TOKEN", "--store", "file", "--no-input"
    )

    assert result.exit_code == 3
    assert "pulumi CLI not found" in result.stderr and "--store file" in result.stderr
    assert fallback.exit_code == 0, fallback.stderr
    assert "credential HF_TOKEN: file" in fallback.stdout


class StdinReplay(ReplayPulumiCommand):
    """Replays, and records what each child would have read on stdin (file descriptor 0);
    ``config set`` writes the encrypted key into the stack file as the CLI does."""

    def __init__(self, root: Path) -> None:
        super().__init__({})
        self.stdin: list[str] = []
        self.root = root

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: auto.OnOutput | None = None,
        on_error: auto.OnOutput | None = None,
    ) -> auto.CommandResult:
        if args[:2] == ["config", "set"]:
            self.stdin.append(os.read(0, 65536).decode())
            path = self.root / "stacks" / "Pulumi.dev.yaml"
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"  {args[2]}:\n    secure: v1:ciphertext\n")
            self._state.calls.append(_call(args, cwd, additional_env))
            return auto.CommandResult(stdout="", stderr="", code=0)
        return super().run(args, cwd, additional_env, on_output, on_error)


def _call(args: list[str], cwd: str, env: Mapping[str, str]) -> Call:
    return Call(tuple(args), cwd, dict(env))


def test_configure_stack_store_pulumi_secret_via_stdin_never_argv(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text("#!/bin/sh\nexit 99\n", encoding="utf-8")
    (bin_dir / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "passphrase"))
    monkeypatch.setenv("HF_TOKEN", CANARY)
    command = StdinReplay(root)

    def engine(settings: RunnerSettings) -> StackRunner:
        return StackRunner(settings, command=command)

    result = _npa(Services(stack_engine=engine))(
        "configure", "-p", "dev", "--credential", "HF_TOKEN", "--no-input", "--json"
    )

    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["status"], doc["stack"]) == ("created", "dev")
    assert doc["credentials"] == [
        {"name": "HF_TOKEN", "store": "stack", "location": "pulumi:dev", "input": "environment"}
    ]
    (set_call,) = [c for c in command.calls if c.args[:2] == ("config", "set")]
    assert set_call.args == (
        "config", "set", "npa-credentials:HF_TOKEN", "--secret", "--stack", "dev",
    )  # fmt: skip
    assert command.stdin == [CANARY]  # the value went through the pipe
    assert all(CANARY not in arg for call in command.calls for arg in call.args)
    assert all(CANARY not in value for call in command.calls for value in call.env.values())
    _no_canary_outside_store(result, None)
    assert CANARY not in (root / "stacks" / "Pulumi.dev.yaml").read_text(encoding="utf-8")


# -- what submit resolves from the project --------------------------------------------------------
LINEAR = REPO / "workflows" / "testing" / "linear-chain.yaml"


def _plan(npa: Invoke, tmp_path: Path, *args: str) -> dict[str, object]:
    result = npa(
        "workbench", "workflow", "submit", LINEAR, "--plan-only", "--no-preflight-images",
        "--no-resolve-accelerators", "--render-dir", tmp_path / "out", *args, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert CANARY not in result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def _sources(doc: dict[str, object]) -> dict[str, object]:
    hints = doc["secret_env_hints"]
    assert isinstance(hints, list)
    return {h["name"]: h["source"] for h in hints}


def test_submit_plan_only_secret_order_env_then_project_then_stack_file(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack_file = _home() / "credentials" / "dev.env"
    stack_file.parent.mkdir(parents=True)
    stack_file.write_text(f"HF_TOKEN={CANARY}\nNGC_API_KEY={CANARY}\nAWS_ACCESS_KEY_ID=x\n")
    stack_file.chmod(0o600)
    npa = _npa()
    monkeypatch.setenv("HF_TOKEN", CANARY)
    npa("configure", "-p", "dev", "--credential", "HF_TOKEN", "--store", "file", "--no-input")
    monkeypatch.setenv("NGC_API_KEY", CANARY)
    npa("configure", "-p", "dev", "--credential", "NGC_API_KEY", "--store", "file", "--no-input")
    monkeypatch.delenv("NGC_API_KEY")
    names = [
        f"--secret-env={n}"
        for n in ("HF_TOKEN", "NGC_API_KEY", "AWS_ACCESS_KEY_ID", "HF_HOME_TOKEN")
    ]

    by_project = _sources(_plan(npa, tmp_path, "-p", "dev", *names))
    by_stack = _sources(_plan(npa, tmp_path, "-s", "dev", *names))

    assert by_project == {
        "HF_TOKEN": "environment",
        "NGC_API_KEY": "project:dev",
        "AWS_ACCESS_KEY_ID": "stack:dev",
        "HF_HOME_TOKEN": None,
    }
    assert by_stack["NGC_API_KEY"] == "stack:dev"  # no project selected: the stack file only


def test_submit_live_missing_secret_names_the_project_and_configure(
    root: Path, tmp_path: Path
) -> None:
    npa = _npa()
    npa("configure", "-p", "lab", "--context", "kind-lab", "--no-input")

    result = npa(
        "workbench", "workflow", "submit", LINEAR, "-p", "lab", "--secret-env", "HF_TOKEN",
        "--no-preflight-images", "--json",
    )  # fmt: skip

    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert "project lab credentials" in error["message"]
    assert "npa configure -p lab --credential HF_TOKEN" in error["remedy"]


def _images(doc: dict[str, object]) -> str:
    return json.dumps(doc["skypilot_yaml"])


def test_submit_plan_only_release_namespace_resolves_unqualified_images(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    npa = _npa()
    npa("configure", "-p", "lab", "--context", "kind-lab", "--release-namespace",
        "reg.example.com/team", "--no-input")  # fmt: skip

    own = _images(_plan(npa, tmp_path, "-p", "lab"))
    explicit = _images(_plan(npa, tmp_path, "-p", "lab", "--registry", "other.example.com/x"))
    monkeypatch.setenv("NPA_REGISTRY", "env.example.com/y")
    from_env = _images(_plan(npa, tmp_path, "-p", "lab"))
    monkeypatch.delenv("NPA_REGISTRY")
    no_project = _images(_plan(npa, tmp_path, "--infra", "k8s/kind-lab"))

    assert "reg.example.com/team/" in own
    assert "other.example.com/x/" in explicit and "reg.example.com" not in explicit
    assert "env.example.com/y/" in from_env and "reg.example.com" not in from_env
    assert "ghcr.io/nebius/nebius-physical-ai/" in no_project


def test_submit_live_request_carries_project_values_resolved_env_first(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from npa_infra.workflow.execution import liverun
    from npa_infra.workflow.supervision import runner
    from npa_infra.workflow.target import credentials

    monkeypatch.setenv("HF_TOKEN", CANARY)
    monkeypatch.setenv("NGC_API_KEY", CANARY + "-p")
    npa = _npa()
    npa("configure", "-p", "lab", "--context", "kind-lab", "--credential", "HF_TOKEN",
        "--credential", "NGC_API_KEY", "--no-input")  # fmt: skip
    monkeypatch.setenv("HF_TOKEN", "from-env")
    monkeypatch.delenv("NGC_API_KEY")
    seen: list[dict[str, str]] = []

    def execute(request: liverun.LiveRequest, env: Mapping[str, str], *_: object) -> object:
        assert request.project is not None and request.project.alias == "lab"
        seen.append(
            credentials.resolve_values(
                request.secret_names, env, npa_home=_home(), stack=None, project=request.project
            )
        )
        return liverun.LiveResult(request.run_id, "w", "one-shot", "SUBMITTED", None, [], None, [])

    monkeypatch.setattr(runner, "execute", execute)  # the launch itself is not under test
    result = npa(
        "workbench", "workflow", "submit", LINEAR, "-p", "lab", "--secret-env", "HF_TOKEN",
        "--secret-env", "NGC_API_KEY", "--no-preflight-images", "--no-resolve-accelerators",
        "--no-stage-src", "--json",
    )  # fmt: skip

    assert result.exit_code == 0, result.stdout + result.stderr
    assert seen == [{"HF_TOKEN": "from-env", "NGC_API_KEY": CANARY + "-p"}]
    assert CANARY not in result.stdout + result.stderr


# -- issue 24: --state-dir, private modes, hostile credential files ----------------------------
@pytest.mark.parametrize(
    "given",
    ["", "state", "./state", "~/state", "/tmp/a\nb", "/proc/self", "/sys/fs"],
    ids=["empty", "relative", "dot-relative", "tilde", "newline", "proc-self", "sys"],
)
def test_configure_state_dir_that_names_no_one_directory_is_a_usage_error(
    root: Path, given: str
) -> None:
    result = _npa()("configure", "-p", "lab", "--context", "c", "--state-dir", given, "--no-input")
    assert result.exit_code == 64, result.stderr
    assert "Error: --state-dir" in result.stderr and "Hint: " in result.stderr
    assert not (_home() / "projects" / "lab.yaml").exists()  # nothing written


def test_configure_state_dir_holding_user_files_refused_left_unmarked(
    root: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "my-data"
    (mine / "submissions" / "thesis").mkdir(parents=True)
    (mine / "supervision").mkdir()
    result = _npa()("configure", "-p", "lab", "--context", "c", "--state-dir", mine, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["details"]["state_dir"] == str(mine)
    assert sorted(os.listdir(mine)) == ["submissions", "supervision"]  # no marker planted
    assert not (_home() / "projects" / "lab.yaml").exists()


def test_configure_state_dir_absent_created_private_and_marked_stored_normalised(
    root: Path, tmp_path: Path
) -> None:
    from npa_infra.localstate import marker

    result = _npa()(
        "configure", "-p", "lab", "--context", "c", "--state-dir", f"{tmp_path}//s/../state/",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["state_dir"] == str(tmp_path / "state")
    assert marker.holds(tmp_path / "state") and _mode(tmp_path / "state") == 0o700
    again = _npa()("configure", "-p", "lab", "--state-dir", tmp_path / "state", "--json")
    assert again.exit_code == 0, again.stderr  # npa's own directory: accepted again


def test_configure_creates_npa_home_and_every_level_0700_whatever_the_umask(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_HOME", str(tmp_path / "new" / "npa-home"))
    old = os.umask(0o022)
    try:
        result = _npa()("configure", "-p", "lab", "--context", "c", "--no-input")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    for level in (tmp_path / "new", _home(), _home() / "projects"):
        assert _mode(level) == 0o700, level
    assert _mode(_home() / "projects" / "lab.yaml") == 0o600


def test_configure_credential_from_fifo_refused_at_once_never_blocks(
    root: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "npa_infra", "configure", "-p", "lab", "--context", "c",
         "--credential", f"HF_TOKEN=@{fifo}", "--no-input"],
        capture_output=True, text=True, timeout=120, env=os.environ.copy(), check=False,
    )  # fmt: skip
    assert done.returncode == 64, done.stderr
    assert "FIFO" in done.stderr and str(fifo) in done.stderr
    assert not (_home() / "projects" / "lab.yaml").exists()
