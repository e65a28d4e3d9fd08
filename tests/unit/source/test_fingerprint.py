"""The fingerprint byte format (runtime-reference.md §6), byte for byte."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.errors import InvariantError
from npa_infra.source import fingerprint
from tests.strategies import source_files

TINY = [
    ("bin/run.sh", True, b"#!/bin/sh\necho hi\n"),
    ("a.txt", False, b"hello\n"),
    ("b/c", False, b""),
]
# Computed once from the spec'd format and pinned: a change here breaks every staged prefix.
TINY_GOLDEN = "286d5321822c1471faa88bbfb4672c2ad79e8238c4d4f8b3f5a415d1c3f43e87"


def _spec_bytes(files: list[tuple[str, bool, bytes]]) -> bytes:
    """The §6 format written out independently: path NUL exec NUL bytes NUL, sorted by path."""
    out = b""
    for path, executable, content in sorted(files):
        out += path.encode() + b"\x00" + (b"x" if executable else b"-") + b"\x00"
        out += content + b"\x00"
    return out


def test_fingerprint_of_tiny_tree_golden() -> None:
    assert fingerprint.fingerprint_of(TINY) == TINY_GOLDEN


def test_fingerprint_of_tiny_tree_equals_sha256_of_spec_bytes() -> None:
    expected = hashlib.sha256(_spec_bytes(TINY)).hexdigest()

    assert fingerprint.fingerprint_of(TINY) == expected


def test_fingerprint_of_empty_tree_sha256_of_nothing() -> None:
    assert fingerprint.fingerprint_of([]) == hashlib.sha256(b"").hexdigest()


def test_tree_hasher_chunked_content_same_as_whole() -> None:
    whole = fingerprint.TreeHasher()
    whole.add("f", False, (b"abcdef",))
    chunked = fingerprint.TreeHasher()
    size = chunked.add("f", False, (b"ab", b"", b"cd", b"ef"))

    assert chunked.hexdigest() == whole.hexdigest()
    assert (size, chunked.file_count, chunked.total_bytes) == (6, 1, 6)


def test_tree_hasher_out_of_order_paths_invariant_error() -> None:
    hasher = fingerprint.TreeHasher()
    hasher.add("b", False, ())

    with pytest.raises(InvariantError, match="out of order"):
        hasher.add("a", False, ())


def test_fingerprint_of_path_boundary_not_ambiguous() -> None:
    # "ab" + "c" and "a" + "bc" must differ: the NUL separators keep fields apart.
    assert fingerprint.fingerprint_of([("ab", False, b"c")]) != fingerprint.fingerprint_of(
        [("a", False, b"bc")]
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [(TINY_GOLDEN, True), (TINY_GOLDEN.upper(), False), (TINY_GOLDEN[:-1], False), ("", False)],
    ids=["hex64", "uppercase", "short", "empty"],
)
def test_is_fingerprint(text: str, expected: bool) -> None:
    assert fingerprint.is_fingerprint(text) is expected


@given(files=source_files(), data=st.data())
def test_fingerprint_of_any_input_order_same(
    files: list[tuple[str, bool, bytes]], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(files))

    assert fingerprint.fingerprint_of(shuffled) == fingerprint.fingerprint_of(files)
    assert fingerprint.fingerprint_of(files) == hashlib.sha256(_spec_bytes(files)).hexdigest()


@given(files=source_files(min_size=1), data=st.data())
def test_fingerprint_of_one_exec_bit_flipped_differs(
    files: list[tuple[str, bool, bytes]], data: st.DataObject
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(files) - 1))
    path, executable, content = files[index]
    flipped = [*files[:index], (path, not executable, content), *files[index + 1 :]]

    assert fingerprint.fingerprint_of(flipped) != fingerprint.fingerprint_of(files)
