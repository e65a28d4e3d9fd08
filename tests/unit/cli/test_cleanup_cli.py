"""``npa cleanup [--yes] [--json]`` through the real typer app: schema, exit codes, no secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_infra.cli.main import app
from npa_infra.projects import store
from npa_infra.projects.record import Project
from tests.support.stackjournal import journal_run

CANARY = "canary-7f3e9b21-never-print-me"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "npa-home"
    credentials = home / "credentials"
    credentials.mkdir(parents=True)
    (credentials / "dev.env").write_text(
        f"# registry\nexport REGISTRY_PASSWORD={CANARY}\nAWS_SECRET_ACCESS_KEY='{CANARY}'\n",
        encoding="utf-8",
    )
    (credentials / "dev.env").chmod(0o600)
    rendered = home / "rendered" / "old-run"
    rendered.mkdir(parents=True)
    (rendered / "a.yaml").write_bytes(b"x" * 2048)
    journal_run(home, "old-run", status="SUCCEEDED")  # the journal proves npa rendered it
    return home


def _invoke(home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["cleanup", *args],
        env={"NPA_HOME": str(home), "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": "", **env},
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


REPORT_KEYS = {
    "status", "caches", "skipped", "stacks", "projects", "credentials", "managed_jobs",
    "cluster_resources", "runbook", "errors",
}  # fmt: skip


def test_cleanup_cli_json_is_one_report_object_with_the_documented_keys(home: Path) -> None:
    code, stdout, _ = _invoke(home, "--json")
    payload = json.loads(stdout)
    assert code == 0
    assert set(payload) == REPORT_KEYS
    assert payload["status"] == "report"
    [cache] = payload["caches"]
    assert set(cache) == {"kind", "path", "bytes", "needed_by", "removed", "reason", "detail"}
    assert (cache["kind"], cache["bytes"], cache["removed"]) == ("rendered_yaml", 2048, False)
    [cred] = payload["credentials"]
    assert cred["names"] == ["AWS_SECRET_ACCESS_KEY", "REGISTRY_PASSWORD"]
    assert payload["runbook"][-1] == "npa cleanup --yes"
    assert (home / "rendered" / "old-run" / "a.yaml").is_file()  # without --yes nothing changes


def test_cleanup_cli_yes_removes_the_cache_and_keeps_credentials(home: Path) -> None:
    code, stdout, _ = _invoke(home, "--yes", "--json")
    payload = json.loads(stdout)
    assert (code, payload["status"], payload["caches"][0]["removed"]) == (0, "cleaned", True)
    assert not (home / "rendered" / "old-run").exists()
    assert CANARY in (home / "credentials" / "dev.env").read_text(encoding="utf-8")


def test_cleanup_cli_text_shows_sizes_and_the_runbook(home: Path) -> None:
    code, stdout, _ = _invoke(home)
    assert code == 0
    assert "rendered_yaml" in stdout and "2.0 KiB, 2048 bytes" in stdout
    assert "credentials: dev" in stdout and "REGISTRY_PASSWORD" in stdout
    assert stdout.rstrip().endswith("npa cleanup --yes")


@pytest.mark.parametrize(
    "args",
    [(), ("--json",), ("--yes",), ("--yes", "--json")],
    ids=["text", "json", "yes", "yes-json"],
)
def test_cleanup_cli_credentials_value_never_in_any_output(
    home: Path, args: tuple[str, ...]
) -> None:
    code, stdout, stderr = _invoke(home, *args)
    assert code == 0
    assert CANARY not in stdout and CANARY not in stderr


# -- -s/--stack and -p/--project (issue 16) ----------------------------------------------------


@pytest.fixture
def two_stacks(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root (cwd) with stacks a and b, a done run and its rendered YAML each,
    credentials for both, and project alpha bound to stack a."""
    root = tmp_path / "root"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text("name: npa-infra\nruntime: python\n", encoding="utf-8")
    for name in ("a", "b"):
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(
            f"config:\n  npa-infra:context: ctx-{name}\n  npa-infra:namespace: ns-{name}\n",
            encoding="utf-8",
        )
        journal_run(home, f"{name}-done", stack=name, status="SUCCEEDED")
        (home / "rendered" / f"{name}-done").mkdir(parents=True)
        (home / "rendered" / f"{name}-done" / "t.yaml").write_bytes(b"y" * 10)
        (home / "credentials" / f"{name}.env").write_text("K=v\n", encoding="utf-8")
    store.save(Project(alias="alpha", stack="a"), {"NPA_HOME": str(home)})
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize(
    ("option", "selector"),
    [(("-s", "a"), "-s a"), (("--stack", "a"), "-s a"), (("-p", "alpha"), "-p alpha"),
     (("--project", "alpha"), "-p alpha")],
    ids=["s", "stack", "p", "project"],
)  # fmt: skip
def test_cleanup_cli_selection_yes_removes_and_lists_only_that_stack(
    home: Path, two_stacks: Path, option: tuple[str, str], selector: str, tmp_path: Path
) -> None:
    code, stdout, stderr = _invoke(home, *option, "--yes", "--json", PATH=str(tmp_path / "no-bin"))
    payload = json.loads(stdout)
    assert (code, payload["status"], payload["errors"]) == (0, "cleaned", []), stderr
    assert set(payload) == REPORT_KEYS  # the JSON shape is the unscoped one
    assert [(c["path"], c["removed"]) for c in payload["caches"]] == [
        (str(home / "rendered" / "a-done"), True)
    ]
    assert not (home / "rendered" / "a-done").exists()
    assert (home / "rendered" / "old-run").is_dir()  # not a's run: neither listed nor removed
    assert (home / "rendered" / "b-done" / "t.yaml").is_file()
    assert [s["name"] for s in payload["stacks"]] == ["a"]
    assert [p["alias"] for p in payload["projects"]] == ["alpha"]
    assert [c["stack"] for c in payload["credentials"]] == ["a"]
    assert payload["runbook"] == [
        "npa skypilot cleanup-controller -s a --yes",
        "npa stack destroy -s a --yes",
        f"npa cleanup {selector} --yes",
    ]


def test_cleanup_cli_without_selection_lists_every_stack(home: Path, two_stacks: Path) -> None:
    code, stdout, _ = _invoke(home, "--json")
    payload = json.loads(stdout)
    assert code == 0
    assert {c["path"] for c in payload["caches"]} == {
        str(home / "rendered" / r) for r in ("a-done", "b-done", "old-run")
    }
    assert [s["name"] for s in payload["stacks"]] == ["a", "b"]
    assert payload["runbook"][-1] == "npa cleanup --yes"


def test_cleanup_cli_unknown_project_refused_json_error_document(
    home: Path, two_stacks: Path
) -> None:
    code, stdout, _ = _invoke(home, "-p", "ghost", "--yes", "--json")
    payload = json.loads(stdout)
    assert code == 1
    assert payload["status"] == "error"
    assert payload["error"]["details"]["reason"] == "unknown_project"
    assert payload["error"]["details"]["stacks"] == ["a", "b"]
    assert (home / "rendered" / "a-done").is_dir()  # refused before anything was removed


def test_cleanup_cli_unknown_project_refused_error_and_hint(home: Path, two_stacks: Path) -> None:
    code, stdout, stderr = _invoke(home, "-p", "ghost")
    assert (code, stdout) == (1, "")
    assert "Error: no project ghost: neither a project entry nor a stack of that name" in stderr
    assert "(projects: alpha; stacks: a, b)" in stderr
    assert "Hint: " in stderr and "Traceback" not in stderr


def test_cleanup_cli_context_project_covers_only_its_own_runs(home: Path, two_stacks: Path) -> None:
    """Its runs are those submitted under its alias: another project's, or no project's, on
    the same context are not (issue 24: a context is no identity)."""
    store.save(Project(alias="onctx", context="ctx-c"), {"NPA_HOME": str(home)})
    mine, theirs = {"context": "ctx-c", "project": "onctx"}, {"context": "ctx-c", "project": "x"}
    journal_run(home, "c-done", stack="", status="SUCCEEDED", data=mine)
    journal_run(home, "x-done", stack="", status="SUCCEEDED", data=theirs)
    journal_run(home, "n-done", stack="", status="SUCCEEDED", data={"context": "ctx-c"})
    for run_id in ("c-done", "x-done", "n-done"):
        (home / "rendered" / run_id).mkdir(parents=True)
    code, stdout, _ = _invoke(home, "-p", "onctx", "--json")
    payload = json.loads(stdout)
    assert code == 0
    assert [c["path"] for c in payload["caches"]] == [str(home / "rendered" / "c-done")]
    assert (payload["stacks"], payload["credentials"]) == ([], [])  # it binds no stack
    assert [p["alias"] for p in payload["projects"]] == ["onctx"]
    assert payload["runbook"] == ["npa cleanup -p onctx --yes"]


def test_cleanup_cli_unknown_stack_refused_not_a_clean_report(home: Path, two_stacks: Path) -> None:
    # as cleanup-controller: a typo'd stack (no file, no state directory) is no "nothing left"
    code, stdout, _ = _invoke(home, "-s", "ghost", "--yes", "--json")
    error = json.loads(stdout)["error"]
    assert code == 1 and error["category"] == "config"
    assert "no stack named 'ghost'" in error["message"]
    assert "known: " in error["remedy"]
    assert (home / "rendered" / "a-done" / "t.yaml").is_file()  # --yes removed nothing
    assert (home / "rendered" / "b-done" / "t.yaml").is_file()
