"""Compose YAML into nodes while counting them, so oversized documents stop early.

``yaml.compose`` builds the whole node graph before anyone can count it: a
7.8 MB spec took 6.5 s and 380 MiB to be refused by a cap checked afterwards
(issue 19). ``compose`` takes libyaml's events (``CParser``; the pure-Python
parser when the wheel lacks it) and builds the nodes itself, counting every
node and alias reference and the nesting depth as it goes, and stops with
``Refused`` at the first one over its limit. Memory and time are therefore
bounded by the limit, not by the document.

Alias expansion is not done here (an alias is the anchored node, shared); the
value builder in ``source.py`` expands aliases and counts what it builds
against the same cap, which is what bounds billion-laughs documents.

Measured on a 5,000-state spec (527 kB): libyaml's own composer 245 ms, this
one 310 ms; on the reference workflow 0.7 ms and 1.0 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import yaml
from yaml.composer import ComposerError
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["Refused", "compose"]

_Parser: Any
try:  # libyaml's parser is much faster; fall back when the wheel lacks it
    from yaml._yaml import CParser

    _Parser = CParser
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader as _Reader
    from yaml.scanner import Scanner as _Scanner

    class _PurePythonParser(_Reader, _Scanner, _PyParser):
        def __init__(self, stream: str) -> None:
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            _PyParser.__init__(self)

    _Parser = _PurePythonParser

# the unbound resolver, typed (PyYAML's stubs leave it untyped); a bound method kept
# on the composer would make it a reference cycle, alive until the next collection
_tag_of = cast(Callable[[Any, type[Node], Any, Any], str], yaml.resolver.Resolver.resolve)


class Refused(Exception):
    """The document is over a limit; ``mark`` is where composing stopped."""

    def __init__(self, reason: str, mark: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.mark = mark


class _Composer(_Parser, yaml.resolver.Resolver):  # type: ignore[misc]  # untyped PyYAML bases
    """Events from the parser, implicit tags from the safe resolver, nodes counted."""

    def __init__(self, text: str, max_nodes: int, max_depth: int) -> None:
        _Parser.__init__(self, text)
        yaml.resolver.Resolver.__init__(self)
        self.anchors: dict[str, Node] = {}
        self.count = 0
        self.max_nodes = max_nodes
        self.max_depth = max_depth

    def single(self) -> Node | None:
        self.get_event()  # stream start
        node = None
        if type(self.peek_event()) is not StreamEndEvent:
            self.get_event()  # document start
            node = self.node(0)
            self.get_event()  # document end
        if type(self.peek_event()) is not StreamEndEvent:
            event = self.get_event()
            raise ComposerError(
                "expected a single document in the stream",
                node.start_mark if node is not None else None,
                "but found another document",
                event.start_mark,
            )
        self.get_event()  # stream end
        return node

    def node(self, depth: int) -> Node:
        event = self.get_event()
        self.count += 1
        if self.count > self.max_nodes:
            raise Refused(f"document has more than {self.max_nodes} nodes", event.start_mark)
        if depth > self.max_depth:
            raise Refused(f"document nests deeper than {self.max_depth} levels", event.start_mark)
        kind = type(event)
        if kind is AliasEvent:
            found = self.anchors.get(event.anchor)
            if found is None:
                raise ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                )
            return found
        tag = event.tag
        if kind is ScalarEvent:
            if tag is None or tag == "!":
                tag = _tag_of(self, ScalarNode, event.value, event.implicit)
            node: Node = ScalarNode(
                tag, event.value, event.start_mark, event.end_mark, style=event.style
            )
            self._anchor(event.anchor, node)
            return node
        if kind is SequenceStartEvent:
            if tag is None or tag == "!":
                tag = _tag_of(self, SequenceNode, None, event.implicit)
            node = SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
            self._anchor(event.anchor, node)
            while type(self.peek_event()) is not SequenceEndEvent:
                node.value.append(self.node(depth + 1))
        else:
            if tag is None or tag == "!":
                tag = _tag_of(self, MappingNode, None, event.implicit)
            node = MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
            self._anchor(event.anchor, node)
            while type(self.peek_event()) is not MappingEndEvent:
                key = self.node(depth + 1)
                node.value.append((key, self.node(depth + 1)))
        node.end_mark = self.get_event().end_mark
        return node

    def _anchor(self, anchor: str | None, node: Node) -> None:
        if anchor is None:
            return
        first = self.anchors.get(anchor)
        if first is not None:  # refused, as PyYAML's and libyaml's composers do
            raise ComposerError(
                None,
                None,
                f"found duplicate anchor {anchor!r} (first at line {first.start_mark.line + 1})",
                node.start_mark,
            )
        self.anchors[anchor] = node


def compose(text: str, *, max_nodes: int, max_depth: int) -> Node | None:
    """The root node of the single document in ``text`` (``None`` when it is empty).

    Raises:
        Refused: more than ``max_nodes`` nodes, or nesting deeper than ``max_depth``.
        yaml.YAMLError: the text is not one YAML document.
    """
    composer = _Composer(text, max_nodes, max_depth)
    try:
        return composer.single()
    finally:
        composer.dispose()
