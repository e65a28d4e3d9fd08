"""Reading a binary's venv versions from dist-info metadata, and the per-binary cache."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import pytest

from npa_infra.skypilot import drift, venvmeta
from tests.support import skyvenv

# the environment of the `sky` calls: an isolated HOME without a user site
ENV = {"HOME": "/nonexistent/npa-iso-home", "PATH": "/usr/bin:/bin"}


class CountingReader:
    """``venvmeta.read_headers`` that counts the METADATA files it is asked for."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __call__(self, path: Path) -> str:
        self.paths.append(path)
        return venvmeta.read_headers(path)


@pytest.fixture
def reader() -> CountingReader:
    return CountingReader()


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "npa-home" / "cache"


def test_observe_good_venv_reads_every_gated_version_and_python(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv")
    venv = venvmeta.observe(sky, cache, ENV, reader=reader)
    assert venv.state is drift.VenvState.READ
    assert dict(venv.versions) == skyvenv.GOOD  # METADATA's header, not the body's "Version: 999"
    assert venv.python == skyvenv.PYTHON
    assert sorted(p.parent.name for p in reader.paths) == sorted(
        f"{n}-{v}.dist-info" for n, v in skyvenv.GOOD.items()
    )


def test_observe_symlinked_venv_reads_the_real_venv(tmp_path: Path, cache: Path) -> None:
    skyvenv.make_venv(tmp_path / "versions" / "abc", skyvenv.DRIFTED_KUBERNETES)
    (tmp_path / "live").symlink_to(tmp_path / "versions" / "abc")  # bootstrap's layout
    venv = venvmeta.observe(tmp_path / "live" / "bin" / "sky", cache, ENV)
    assert venv.versions["kubernetes"] == "37.0.0"


def test_observe_shell_script_no_interpreter_reads_nothing(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    (tmp_path / "bin").mkdir()
    sky = tmp_path / "bin" / "sky"
    sky.write_text('#!/bin/sh\nexec /opt/sky/bin/sky "$@"\n', encoding="utf-8")
    venv = venvmeta.observe(sky, cache, ENV, reader=reader)
    assert venv.state is drift.VenvState.NO_INTERPRETER
    assert "names no python" in venv.detail
    assert reader.paths == [] and not cache.exists()


def test_observe_venv_without_skypilot_no_skypilot(tmp_path: Path, cache: Path) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv", {**skyvenv.DRIFTED_KUBERNETES, "skypilot": None})
    assert venvmeta.observe(sky, cache, ENV).state is drift.VenvState.NO_SKYPILOT


@pytest.mark.parametrize("defect", ["no-version", "fifo", "two-versions"])
def test_observe_unreadable_metadata_unreadable(tmp_path: Path, cache: Path, defect: str) -> None:
    root = tmp_path / "venv"
    sky = skyvenv.make_venv(root)
    metadata = next(root.glob("lib/*/site-packages/kubernetes-*.dist-info")) / "METADATA"
    if defect == "no-version":
        metadata.write_text("Name: kubernetes\n\n", encoding="utf-8")
    elif defect == "fifo":
        metadata.unlink()
        os.mkfifo(metadata)  # must neither block nor be read
    else:
        other = metadata.parent.with_name("kubernetes-37.0.0.dist-info")
        other.mkdir()
        (other / "METADATA").write_text("Name: kubernetes\nVersion: 37.0.0\n", encoding="utf-8")
    venv = venvmeta.observe(sky, cache, ENV)
    assert venv.state is drift.VenvState.UNREADABLE
    assert "kubernetes" in venv.detail


def test_observe_second_call_hits_cache_without_reading_metadata(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv", skyvenv.DRIFTED_KUBERNETES)
    first = venvmeta.observe(sky, cache, ENV, reader=reader)
    reads = len(reader.paths)
    second = venvmeta.observe(sky, cache, ENV, reader=reader)
    assert reads == 4 and len(reader.paths) == reads  # the hit read no METADATA
    assert second == first


def test_observe_cache_file_private_in_private_directory(tmp_path: Path, cache: Path) -> None:
    venvmeta.observe(skyvenv.make_venv(tmp_path / "venv"), cache, ENV)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / venvmeta.CACHE_NAME).st_mode) == 0o600


def test_observe_repaired_venv_invalidates_cache(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    root = tmp_path / "venv"
    sky = skyvenv.make_venv(root, skyvenv.DRIFTED_KUBERNETES)
    assert venvmeta.observe(sky, cache, ENV, reader=reader).versions["kubernetes"] == "37.0.0"
    skyvenv.set_version(root, "kubernetes", "35.0.0")  # pip replaces the dist-info directory
    reads = len(reader.paths)
    assert venvmeta.observe(sky, cache, ENV, reader=reader).versions["kubernetes"] == "35.0.0"
    assert len(reader.paths) > reads


def test_observe_metadata_edited_in_place_invalidates_cache(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    root = tmp_path / "venv"
    sky = skyvenv.make_venv(root)
    venvmeta.observe(sky, cache, ENV, reader=reader)
    metadata = next(root.glob("lib/*/site-packages/fastapi-*.dist-info")) / "METADATA"
    metadata.write_text("Name: fastapi\nVersion: 0.120.0\n\n", encoding="utf-8")
    assert venvmeta.observe(sky, cache, ENV, reader=reader).versions["fastapi"] == "0.120.0"


def test_observe_venv_written_just_now_not_cached(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv")
    newest = os.stat(sky).st_mtime
    venvmeta.observe(sky, cache, ENV, reader=reader, now=lambda: newest + 0.5)
    venvmeta.observe(sky, cache, ENV, reader=reader, now=lambda: newest + 0.5)
    assert len(reader.paths) == 8  # read twice: a change in the same tick would go unseen


@pytest.mark.parametrize("content", ["not json", '{"format": 1, "entries": []}', "[]"])
def test_observe_corrupt_cache_is_a_miss(tmp_path: Path, cache: Path, content: str) -> None:
    cache.mkdir(parents=True)
    (cache / venvmeta.CACHE_NAME).write_text(content, encoding="utf-8")
    venv = venvmeta.observe(skyvenv.make_venv(tmp_path / "venv"), cache, ENV)
    assert venv.state is drift.VenvState.READ


# -- issue 24: every install layout is read, none waved through --------------------------
def _layout(
    kind: str, root: Path, versions: Mapping[str, str | None]
) -> tuple[Path, dict[str, str]]:
    """A ``sky`` of layout ``kind`` under ``root`` and the environment its calls run with."""
    if kind == "venv":
        return skyvenv.make_venv(root / "venv", versions), ENV
    if kind == "venv-trampoline":
        return skyvenv.make_venv(root / "venv", versions, trampoline=True), ENV
    if kind == "conda":
        return skyvenv.make_conda(root / "conda", versions), ENV
    if kind == "conda-env-shebang":
        sky = skyvenv.make_conda(root / "conda", versions, shebang="/usr/bin/env python")
        return sky, {**ENV, "PATH": f"{root / 'conda' / 'bin'}:/usr/bin:/bin"}
    if kind == "system":
        return skyvenv.make_system(root / "usr", versions), ENV
    # --user: the isolated HOME of the sky calls holds the user site
    home = root / "iso-home"
    return skyvenv.make_user(root / "usr", home / ".local", versions), {**ENV, "HOME": str(home)}


LAYOUTS = ["venv", "venv-trampoline", "conda", "conda-env-shebang", "system", "user"]


@pytest.mark.parametrize("kind", LAYOUTS)
def test_observe_each_layout_drifted_kubernetes_read_as_37(
    tmp_path: Path, cache: Path, kind: str
) -> None:
    sky, env = _layout(kind, tmp_path, skyvenv.DRIFTED_KUBERNETES)
    venv = venvmeta.observe(sky, cache, env)
    assert venv.state is drift.VenvState.READ
    assert venv.versions["kubernetes"] == "37.0.0"
    assert drift.decide(drift.Observation(venv, None, ())).reason is drift.Reason.PINS_BROKEN


@pytest.mark.parametrize("kind", LAYOUTS)
def test_observe_each_layout_good_pins_hold(tmp_path: Path, cache: Path, kind: str) -> None:
    sky, env = _layout(kind, tmp_path, skyvenv.GOOD)
    venv = venvmeta.observe(sky, cache, env)
    assert dict(venv.versions) == skyvenv.GOOD
    assert drift.decide(drift.Observation(venv, None, ())).reason is drift.Reason.PINS_HOLD


def test_observe_user_install_run_with_another_home_imports_no_skypilot(
    tmp_path: Path, cache: Path
) -> None:
    sky, _env = _layout("user", tmp_path, skyvenv.GOOD)
    venv = venvmeta.observe(sky, cache, ENV)  # the user site of another HOME is not imported
    assert venv.state is drift.VenvState.NO_SKYPILOT
    assert "site-packages" in venv.detail


def test_observe_user_site_shadows_system_first_on_path_wins(tmp_path: Path, cache: Path) -> None:
    sky, env = _layout("user", tmp_path, skyvenv.DRIFTED_KUBERNETES)
    skyvenv.install(
        tmp_path / "usr" / "lib" / "python3.11" / "site-packages", "kubernetes", "35.0.0"
    )
    assert venvmeta.observe(sky, cache, env).versions["kubernetes"] == "37.0.0"


def test_observe_user_site_created_after_cached_read_invalidates(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky, env = _layout("system", tmp_path, skyvenv.GOOD)
    home = tmp_path / "iso-home"
    env = {**env, "HOME": str(home)}
    assert venvmeta.observe(sky, cache, env, reader=reader).versions["kubernetes"] == "35.0.0"
    site = home / ".local" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    skyvenv.install(site, "kubernetes", "37.0.0")  # `pip install --user kubernetes` later
    skyvenv.age(home)
    assert venvmeta.observe(sky, cache, env, reader=reader).versions["kubernetes"] == "37.0.0"


def test_observe_pythonpath_first_unless_isolated(tmp_path: Path, cache: Path) -> None:
    sky, env = _layout("conda", tmp_path, skyvenv.GOOD)
    extra = tmp_path / "extra"
    extra.mkdir()
    skyvenv.install(extra, "kubernetes", "37.0.0")
    skyvenv.age(extra)
    env = {**env, "PYTHONPATH": str(extra)}
    assert venvmeta.observe(sky, cache, env).versions["kubernetes"] == "37.0.0"
    isolated = skyvenv.make_venv(tmp_path / "venv")  # its shebang runs python -I
    assert venvmeta.observe(isolated, cache, env).versions["kubernetes"] == "35.0.0"


@pytest.mark.parametrize(
    ("first_line", "why"),
    [
        ("#!/nonexistent/bin/python3\n", "does not exist"),
        ("#!/usr/bin/env python3.99\n", "no python3.99 is on the PATH"),
        ("\x7fELF\x02\x01\x01", "names no python"),
    ],
    ids=["missing-interpreter", "env-name-not-on-path", "compiled-binary"],
)
def test_observe_unreadable_interpreter_no_interpreter_not_cached(
    tmp_path: Path, cache: Path, first_line: str, why: str
) -> None:
    sky = tmp_path / "sky"
    sky.write_text(first_line, encoding="utf-8")
    sky.chmod(0o755)
    os.utime(sky, (1.0, 1.0))
    venv = venvmeta.observe(sky, cache, ENV)
    assert venv.state is drift.VenvState.NO_INTERPRETER and why in venv.detail
    assert not (cache / venvmeta.CACHE_NAME).exists()  # installing it next is seen at once
