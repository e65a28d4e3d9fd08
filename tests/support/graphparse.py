"""Minimal readers of the Mermaid and DOT text ``npa_infra.plan.graphtext`` emits.

They read back exactly the line shapes the emitters write (one statement a
line) and undo the escaping, so a test can compare the parsed structure with
the graph model: node ids with their label lines, edges with their labels,
and which cluster holds which node. Anything else on a line is an error, so
a label that broke out of its quotes fails the parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Parsed", "parse_dot", "parse_mermaid"]


@dataclass
class Parsed:
    nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # id -> label lines
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (source, target, label)
    parent: dict[str, str] = field(default_factory=dict)  # node or cluster id -> cluster id
    clusters: dict[str, str] = field(default_factory=dict)  # cluster id -> label


_ID = r"[A-Za-z][A-Za-z0-9_]*"
_MERMAID_NODE = re.compile(
    rf'^({_ID})(\(\(|\(\[|\[\[|\{{\{{|\[|\{{)"([^"]*)"(\)\)|\]\)|\]\]|\}}\}}|\]|\}})$'
)
_MERMAID_EDGE = re.compile(rf'^({_ID}) (?:-->|-\.->)(?:\|"([^"]*)"\|)? ({_ID})$')
_MERMAID_SUBGRAPH = re.compile(rf'^subgraph ({_ID})\["([^"]*)"\]$')
_PAIRS = {"((": "))", "([": "])", "[[": "]]", "{{": "}}", "[": "]", "{": "}"}


def _mermaid_unescape(text: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), text)


def parse_mermaid(text: str) -> Parsed:
    """Nodes, edges and clusters of a ``flowchart TD``; ValueError on any other line."""
    lines = text.splitlines()
    if not lines or lines[0] != "flowchart TD":
        raise ValueError("not a flowchart TD")
    out, stack = Parsed(), []
    for raw in lines[1:]:
        line = raw.strip()
        if m := _MERMAID_SUBGRAPH.match(line):
            if stack:
                out.parent[m.group(1)] = stack[-1]
            out.clusters[m.group(1)] = _mermaid_unescape(m.group(2))
            stack.append(m.group(1))
        elif line == "end":
            stack.pop()
        elif m := _MERMAID_NODE.match(line):
            if _PAIRS[m.group(2)] != m.group(4):
                raise ValueError(f"mismatched shape: {line}")
            lines_ = tuple(_mermaid_unescape(p) for p in m.group(3).split("<br>"))
            out.nodes[m.group(1)] = lines_
            if stack:
                out.parent[m.group(1)] = stack[-1]
        elif m := _MERMAID_EDGE.match(line):
            out.edges.append((m.group(1), m.group(3), _mermaid_unescape(m.group(2) or "")))
        else:
            raise ValueError(f"unexpected mermaid line: {raw!r}")
    if stack:
        raise ValueError("unclosed subgraph")
    return out


_DOT_STRING = r'"((?:[^"\\]|\\.)*)"'
_DOT_NODE = re.compile(rf"^{_DOT_STRING} \[label={_DOT_STRING}, shape=\w+(?:, style=\"\w+\")?\];$")
_DOT_EDGE = re.compile(
    rf"^{_DOT_STRING} -> {_DOT_STRING}(?: \[(?:label={_DOT_STRING})?(?:, )?(?:style=dashed)?\])?;$"
)
_DOT_CLUSTER = re.compile(rf"^subgraph {_DOT_STRING} \{{$")
_DOT_LABEL = re.compile(rf"^label={_DOT_STRING};$")


def _dot_unescape_line(text: str) -> str:
    # only the numeric entities the emitter writes (html.unescape remaps some code points)
    plain = re.sub(r"\\(.)", r"\1", text)
    return re.sub(r"&#(\d+);", lambda m: chr(int(m.group(1))), plain)


def _dot_lines(text: str) -> tuple[str, ...]:
    # split on the two-character \n that joins lines, never on an escaped backslash + n
    parts, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            if text[i + 1] == "n":
                parts.append("".join(current))
                current, i = [], i + 2
                continue
            current.append(text[i : i + 2])
            i += 2
            continue
        current.append(text[i])
        i += 1
    parts.append("".join(current))
    return tuple(_dot_unescape_line(p) for p in parts)


def parse_dot(text: str) -> Parsed:
    """Nodes, edges and clusters of a ``digraph``; ValueError on any other line."""
    lines = text.splitlines()
    if not lines or not re.match(rf"^digraph {_DOT_STRING} \{{$", lines[0]) or lines[-1] != "}":
        raise ValueError("not a digraph")
    out, stack = Parsed(), []
    for raw in lines[1:-1]:
        line = raw.strip()
        if line in ("rankdir=TB;", 'style="rounded,dashed";'):
            continue
        if m := _DOT_CLUSTER.match(line):
            if stack:
                out.parent[m.group(1)] = stack[-1]
            out.clusters[m.group(1)] = ""
            stack.append(m.group(1))
        elif line == "}":
            stack.pop()
        elif (m := _DOT_LABEL.match(line)) and stack:
            out.clusters[stack[-1]] = _dot_unescape_line(m.group(1))
        elif m := _DOT_NODE.match(line):
            out.nodes[m.group(1)] = _dot_lines(m.group(2))
            if stack:
                out.parent[m.group(1)] = stack[-1]
        elif m := _DOT_EDGE.match(line):
            out.edges.append((m.group(1), m.group(2), _dot_unescape_line(m.group(3) or "")))
        else:
            raise ValueError(f"unexpected dot line: {raw!r}")
    if stack:
        raise ValueError("unclosed cluster")
    return out
