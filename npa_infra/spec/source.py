"""Load YAML while keeping the line and column of every node.

The loader composes YAML nodes with libyaml (or the pure-Python fallback) and
builds plain Python values itself, recording the position of every mapping
value and sequence item under its JSON path. It refuses what would hurt a
process: files over ``MAX_BYTES``, nesting deeper than ``MAX_DEPTH``, and alias
expansion beyond ``MAX_NODES`` (billion-laughs style documents).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from npa_infra.spec.issues import SpecIssue

__all__ = ["LoadedDocument", "Position", "SourceMap", "json_path", "load_file", "load_text"]

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000

PathKey = tuple[str | int, ...]

try:  # libyaml is much faster; fall back when the wheel lacks it
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

_SCALAR_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_MERGE_TAG = "tag:yaml.org,2002:merge"


class Position(NamedTuple):
    line: int
    column: int


@dataclass(slots=True)
class SourceMap:
    """Positions of values (``values``) and of mapping keys (``keys``) by path."""

    values: dict[PathKey, Position] = field(default_factory=dict)
    keys: dict[PathKey, Position] = field(default_factory=dict)

    def locate(self, path: PathKey, *, key: bool = False) -> Position:
        """The position of ``path``, falling back to its nearest located ancestor."""
        table = self.keys if key else self.values
        probe = path
        while True:
            found = table.get(probe) or self.values.get(probe)
            if found is not None:
                return found
            if not probe:
                return Position(0, 0)
            probe = probe[:-1]


class LoadedDocument(NamedTuple):
    data: Any
    source_map: SourceMap
    lines: list[str]
    label: str


def json_path(path: PathKey) -> str:
    """``('states', 'a', 'run')`` → ``$.states.a.run``; list indexes as ``[i]``."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class _TooLarge(Exception):
    def __init__(self, reason: str, mark: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.mark = mark


class _Builder:
    def __init__(self) -> None:
        self.source_map = SourceMap()
        self.count = 0

    def build(self, node: yaml.Node, path: PathKey, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _TooLarge(f"document expands to more than {MAX_NODES} nodes", node.start_mark)
        if depth > MAX_DEPTH:
            raise _TooLarge(f"document nests deeper than {MAX_DEPTH} levels", node.start_mark)
        mark = node.start_mark
        # assignment, not setdefault: a duplicate key keeps the last value, so its position must win
        self.source_map.values[path] = Position(mark.line + 1, mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        return _SCALAR_CONSTRUCTOR.construct_object(node)

    def _rebase(self, prefix: PathKey, target: PathKey) -> None:
        n = len(prefix)
        for table in (self.source_map.values, self.source_map.keys):
            for key, pos in list(table.items()):
                if key[:n] == prefix and len(key) > n:
                    table.setdefault((*target, *key[n:]), pos)

    def _mapping(self, node: yaml.MappingNode, path: PathKey, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # merged values are built under a side path, then their positions are
                # rebased onto this mapping unless an explicit key already has one
                side = (*path, "<<")
                merged = self.build(value_node, side, depth + 1)
                sources = merged if isinstance(merged, list) else [merged]
                for index, source in enumerate(sources):
                    if isinstance(source, dict):
                        prefix = (*side, index) if isinstance(merged, list) else side
                        self._rebase(prefix, path)
                        for k, v in source.items():
                            result.setdefault(k, v)
                continue
            key = self.build(key_node, (*path, "<key>"), depth + 1)
            if isinstance(key, (dict, list)):
                key = str(key)
            key_path = (*path, key if isinstance(key, (str, int)) else str(key))
            km = key_node.start_mark
            self.source_map.keys[key_path] = Position(km.line + 1, km.column + 1)
            result[key] = self.build(value_node, key_path, depth + 1)
        return result


def _decode(raw: bytes) -> str | SpecIssue:
    if b"\x00" in raw[:8192]:
        return SpecIssue("", "file is binary, not YAML", hint="pass a workflow spec (.yaml)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return SpecIssue(
            "", f"file is not valid UTF-8 (byte {exc.start})", hint="save the spec as UTF-8"
        )


def load_text(text: str, label: str) -> LoadedDocument | SpecIssue:
    """Parse YAML text; return the document or one file-level issue."""
    lines = text.splitlines()
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or "could not parse"
        return SpecIssue(
            "$",
            f"invalid YAML: {problem}",
            hint="check indentation and quoting near this position",
            line=line,
            column=col,
        )
    except yaml.YAMLError as exc:
        return SpecIssue(
            "$", f"invalid YAML: {str(exc).splitlines()[0]}", hint="fix the YAML syntax"
        )
    except RecursionError:
        return SpecIssue("$", "invalid YAML: nesting is too deep", hint="flatten the document")
    except UnicodeError:
        return SpecIssue(
            "$", "file holds text that is not valid Unicode", hint="save the spec as UTF-8"
        )
    if node is None:
        return LoadedDocument(None, SourceMap(), lines, label)
    builder = _Builder()
    try:
        data = builder.build(node, (), 0)
    except _TooLarge as exc:
        m = exc.mark
        return SpecIssue(
            "$",
            f"refused: {exc.reason}",
            hint="a workflow spec is small; remove deep nesting or alias expansion",
            line=m.line + 1,
            column=m.column + 1,
        )
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        return SpecIssue("$", f"invalid YAML value: {exc}", hint="fix the YAML value")
    except RecursionError:
        return SpecIssue("$", "invalid YAML: nesting is too deep", hint="flatten the document")
    return LoadedDocument(data, builder.source_map, lines, label)


def load_file(path: Path) -> LoadedDocument | SpecIssue:
    """Read and parse a spec file; every failure is a file-level issue."""
    label = str(path)
    try:
        if path.is_dir():
            return SpecIssue("", f"{label} is a directory", hint="pass the spec file itself")
        size = path.stat().st_size
        if size > MAX_BYTES:
            return SpecIssue(
                "",
                f"file is {size} bytes; specs are limited to {MAX_BYTES} bytes",
                hint="a workflow spec is small; check you passed the right file",
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        return SpecIssue("", f"spec file not found: {label}", hint="check the path")
    except OSError as exc:
        return SpecIssue(
            "", f"cannot read {label}: {exc.strerror}", hint="check the path and permissions"
        )
    text = _decode(raw)
    if isinstance(text, SpecIssue):
        return text
    return load_text(text, label)
