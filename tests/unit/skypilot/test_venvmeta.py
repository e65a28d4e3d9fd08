"""Reading a binary's venv versions from dist-info metadata, and the per-binary cache."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from npa_infra.skypilot import drift, venvmeta
from tests.support import skyvenv


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
    venv = venvmeta.observe(sky, cache, reader=reader)
    assert venv.state is drift.VenvState.READ
    assert dict(venv.versions) == skyvenv.GOOD  # METADATA's header, not the body's "Version: 999"
    assert venv.python == skyvenv.PYTHON
    assert sorted(p.parent.name for p in reader.paths) == sorted(
        f"{n}-{v}.dist-info" for n, v in skyvenv.GOOD.items()
    )


def test_observe_symlinked_venv_reads_the_real_venv(tmp_path: Path, cache: Path) -> None:
    skyvenv.make_venv(tmp_path / "versions" / "abc", skyvenv.DRIFTED_KUBERNETES)
    (tmp_path / "live").symlink_to(tmp_path / "versions" / "abc")  # bootstrap's layout
    venv = venvmeta.observe(tmp_path / "live" / "bin" / "sky", cache)
    assert venv.versions["kubernetes"] == "37.0.0"


def test_observe_binary_outside_venv_not_a_venv_reads_nothing(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    (tmp_path / "bin").mkdir()
    sky = tmp_path / "bin" / "sky"
    sky.write_text("#!/bin/sh\n", encoding="utf-8")
    venv = venvmeta.observe(sky, cache, reader=reader)
    assert venv.state is drift.VenvState.NOT_A_VENV
    assert reader.paths == [] and not cache.exists()


def test_observe_venv_without_skypilot_no_skypilot(tmp_path: Path, cache: Path) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv", {**skyvenv.DRIFTED_KUBERNETES, "skypilot": None})
    assert venvmeta.observe(sky, cache).state is drift.VenvState.NO_SKYPILOT


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
    venv = venvmeta.observe(sky, cache)
    assert venv.state is drift.VenvState.UNREADABLE
    assert "kubernetes" in venv.detail


def test_observe_second_call_hits_cache_without_reading_metadata(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv", skyvenv.DRIFTED_KUBERNETES)
    first = venvmeta.observe(sky, cache, reader=reader)
    reads = len(reader.paths)
    second = venvmeta.observe(sky, cache, reader=reader)
    assert reads == 4 and len(reader.paths) == reads  # the hit read no METADATA
    assert second == first


def test_observe_cache_file_private_in_private_directory(tmp_path: Path, cache: Path) -> None:
    venvmeta.observe(skyvenv.make_venv(tmp_path / "venv"), cache)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / venvmeta.CACHE_NAME).st_mode) == 0o600


def test_observe_repaired_venv_invalidates_cache(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    root = tmp_path / "venv"
    sky = skyvenv.make_venv(root, skyvenv.DRIFTED_KUBERNETES)
    assert venvmeta.observe(sky, cache, reader=reader).versions["kubernetes"] == "37.0.0"
    skyvenv.set_version(root, "kubernetes", "35.0.0")  # pip replaces the dist-info directory
    reads = len(reader.paths)
    assert venvmeta.observe(sky, cache, reader=reader).versions["kubernetes"] == "35.0.0"
    assert len(reader.paths) > reads


def test_observe_metadata_edited_in_place_invalidates_cache(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    root = tmp_path / "venv"
    sky = skyvenv.make_venv(root)
    venvmeta.observe(sky, cache, reader=reader)
    metadata = next(root.glob("lib/*/site-packages/fastapi-*.dist-info")) / "METADATA"
    metadata.write_text("Name: fastapi\nVersion: 0.120.0\n\n", encoding="utf-8")
    assert venvmeta.observe(sky, cache, reader=reader).versions["fastapi"] == "0.120.0"


def test_observe_venv_written_just_now_not_cached(
    tmp_path: Path, cache: Path, reader: CountingReader
) -> None:
    sky = skyvenv.make_venv(tmp_path / "venv")
    newest = os.stat(sky).st_mtime
    venvmeta.observe(sky, cache, reader=reader, now=lambda: newest + 0.5)
    venvmeta.observe(sky, cache, reader=reader, now=lambda: newest + 0.5)
    assert len(reader.paths) == 8  # read twice: a change in the same tick would go unseen


@pytest.mark.parametrize("content", ["not json", '{"format": 1, "entries": []}', "[]"])
def test_observe_corrupt_cache_is_a_miss(tmp_path: Path, cache: Path, content: str) -> None:
    cache.mkdir(parents=True)
    (cache / venvmeta.CACHE_NAME).write_text(content, encoding="utf-8")
    venv = venvmeta.observe(skyvenv.make_venv(tmp_path / "venv"), cache)
    assert venv.state is drift.VenvState.READ
