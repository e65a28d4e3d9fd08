"""Load YAML while keeping the line and column of every node.

The loader composes YAML nodes from libyaml's events (``composer.py``) and
builds plain Python values itself, recording the position of every mapping
value and sequence item under its JSON path. It refuses what would hurt a
process, each before the cost is paid (issues 18 and 19): paths that are not
regular files and files over ``MAX_BYTES`` (``regularfile.read``: refused
before reading, bounded while reading), documents of more than ``MAX_NODES``
nodes or nesting deeper than ``MAX_DEPTH`` (refused while composing), and
alias expansion beyond ``MAX_NODES`` (billion-laughs, refused while building).

A key written twice in one mapping (a state defined twice) keeps the last
value, as YAML loaders do, and is reported: ``LoadedDocument.issues`` holds one
located issue per repeated key, so validation reports them with every other
problem in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from npa_infra import regularfile
from npa_infra.spec import composer
from npa_infra.spec.issues import SpecIssue

__all__ = [
    "LIMITS",
    "Limits",
    "LoadedDocument",
    "Position",
    "SourceMap",
    "json_path",
    "load_file",
    "load_text",
]

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000

PathKey = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one document may cost; tests pass small ones."""

    max_bytes: int = MAX_BYTES
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES


LIMITS = Limits()

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"


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
    # located problems the document has though it loaded (duplicate keys)
    issues: tuple[SpecIssue, ...] = ()


def json_path(path: PathKey) -> str:
    """``('states', 'a', 'run')`` → ``$.states.a.run``; list indexes as ``[i]``."""
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class _Builder:
    """Plain values from composed nodes, with positions, aliases expanded and counted."""

    def __init__(self, limits: Limits) -> None:
        self.source_map = SourceMap()
        self.limits = limits
        self.count = 0
        self.duplicates: dict[Position, SpecIssue] = {}
        # one per document (issue 19): PyYAML's constructor caches every node it
        # builds, so a shared one kept each document's scalar nodes alive for good
        self.scalars = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: PathKey, depth: int) -> Any:
        self.count += 1
        if self.count > self.limits.max_nodes:
            raise composer.Refused(
                f"document expands to more than {self.limits.max_nodes} nodes", node.start_mark
            )
        if depth > self.limits.max_depth:
            raise composer.Refused(
                f"document nests deeper than {self.limits.max_depth} levels", node.start_mark
            )
        mark = node.start_mark
        # assignment, not setdefault: a duplicate key keeps the last value, so its position must win
        self.source_map.values[path] = Position(mark.line + 1, mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        if node.tag == _STR_TAG:
            return node.value  # what the constructor returns for a str scalar, uncached
        return self.scalars.construct_object(node)

    def _merged(self, node: yaml.Node, side: PathKey, depth: int) -> tuple[Any, SourceMap]:
        # built into a map of its own, so rebasing costs the merged subtree, not the document
        outer, self.source_map = self.source_map, SourceMap()
        try:
            return self.build(node, side, depth), self.source_map
        finally:
            merged_map, self.source_map = self.source_map, outer
            self.source_map.values.update(merged_map.values)
            self.source_map.keys.update(merged_map.keys)

    def _mapping(self, node: yaml.MappingNode, path: PathKey, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        explicit: dict[Any, Position] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # merged values are built under a side path, then their positions are
                # rebased onto this mapping unless an explicit key already has one
                side = (*path, "<<")
                merged, side_map = self._merged(value_node, side, depth + 1)
                sources = merged if isinstance(merged, list) else [merged]
                for index, source in enumerate(sources):
                    if isinstance(source, dict):
                        prefix = (*side, index) if isinstance(merged, list) else side
                        _rebase(side_map, self.source_map, prefix, path)
                        for k, v in source.items():
                            result.setdefault(k, v)
                continue
            key = self.build(key_node, (*path, "<key>"), depth + 1)
            if isinstance(key, (dict, list)):
                key = str(key)
            key_path = (*path, key if isinstance(key, (str, int)) else str(key))
            km = key_node.start_mark
            here = Position(km.line + 1, km.column + 1)
            if key in explicit:
                self._duplicate(key, key_path, explicit[key], here)
            explicit[key] = here
            self.source_map.keys[key_path] = here
            result[key] = self.build(value_node, key_path, depth + 1)
        return result

    def _duplicate(self, key: Any, key_path: PathKey, first: Position, here: Position) -> None:
        # issue 18: the last value wins silently in YAML; a second definition is an error
        # at the second key, naming the first (once, however often an alias repeats it)
        state = key_path[1] if len(key_path) > 1 and key_path[0] == "states" else None
        self.duplicates.setdefault(
            here,
            SpecIssue(
                json_path(key_path),
                f"duplicate key {key!r}: already defined at line {first.line}",
                hint="keep one of the two; YAML would silently use only the last",
                line=here.line,
                column=here.column,
                state=state if isinstance(state, str) else None,
            ),
        )


def _rebase(side: SourceMap, into: SourceMap, prefix: PathKey, target: PathKey) -> None:
    n = len(prefix)
    for source_table, table in ((side.values, into.values), (side.keys, into.keys)):
        for key, pos in source_table.items():
            if key[:n] == prefix and len(key) > n:
                table.setdefault((*target, *key[n:]), pos)


def _decode(raw: bytes) -> str | SpecIssue:
    if b"\x00" in raw[:8192]:
        return SpecIssue("", "file is binary, not YAML", hint="pass a workflow spec (.yaml)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return SpecIssue(
            "", f"file is not valid UTF-8 (byte {exc.start})", hint="save the spec as UTF-8"
        )


def _refused(exc: composer.Refused) -> SpecIssue:
    m = exc.mark
    return SpecIssue(
        "$",
        f"refused: {exc.reason}",
        hint="a workflow spec is small; remove deep nesting or alias expansion",
        line=m.line + 1,
        column=m.column + 1,
    )


def load_text(text: str, label: str, *, limits: Limits = LIMITS) -> LoadedDocument | SpecIssue:
    """Parse YAML text; return the document (with its duplicate keys) or one file-level issue.

    The text is split into lines only once it has loaded: a refused document costs
    the nodes up to the cap and libyaml's copy of the text, not a string per line.
    """
    try:
        node = composer.compose(text, max_nodes=limits.max_nodes, max_depth=limits.max_depth)
    except composer.Refused as exc:
        return _refused(exc)
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
        return LoadedDocument(None, SourceMap(), text.splitlines(), label)
    builder = _Builder(limits)
    try:
        data = builder.build(node, (), 0)
    except composer.Refused as exc:
        return _refused(exc)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        return SpecIssue("$", f"invalid YAML value: {exc}", hint="fix the YAML value")
    except RecursionError:
        return SpecIssue("$", "invalid YAML: nesting is too deep", hint="flatten the document")
    duplicates = tuple(builder.duplicates.values())
    return LoadedDocument(data, builder.source_map, text.splitlines(), label, duplicates)


def load_file(path: Path, *, limits: Limits = LIMITS) -> LoadedDocument | SpecIssue:
    """Read and parse a spec file; every failure is a file-level issue.

    FIFOs, devices, directories and sockets are refused before reading; symlinks
    to regular files are followed (``regularfile``).
    """
    label = str(path)
    try:
        raw = regularfile.read(path, limits.max_bytes)
    except regularfile.RefusedFile as exc:
        return SpecIssue("", exc.message, hint=f"a workflow spec is a small file; {exc.hint}")
    except FileNotFoundError:
        return SpecIssue("", f"spec file not found: {label}", hint="check the path")
    except OSError as exc:
        return SpecIssue(
            "", f"cannot read {label}: {exc.strerror}", hint="check the path and permissions"
        )
    text = _decode(raw)
    if isinstance(text, SpecIssue):
        return text
    return load_text(text, label, limits=limits)
