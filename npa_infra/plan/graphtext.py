"""Print a ``graph.Graph`` as a Mermaid flowchart or a Graphviz DOT digraph.

Labels come from specs (state names, tool refs, config values), so every
character either format could read as syntax is escaped, and nothing a label
holds can end a quoted string, open a comment or start a new statement:

- Mermaid: labels are quoted (``id["..."]``, ``-->|"..."|``); ``"``, ``#``,
  ``&``, ``<``, ``>``, ``|``, ``;``, ``%``, a backtick and every non-printable
  character become Mermaid entity codes (``#34;``); label lines are joined
  with ``<br>``, which cannot occur in an escaped line.
- DOT: ids and labels are quoted; ``\\`` and ``"`` are backslash-escaped,
  ``&`` and non-printable characters become HTML entities (Graphviz decodes
  them in every label), and label lines are joined with ``\\n``.

Node shapes: task a box, decision a rhombus, loop header a hexagon, sequence
header a stadium, parallel header a subroutine box, start and end circles.
A loop back-edge is dotted (Mermaid) or dashed (DOT). Pure: it returns text.
"""

from __future__ import annotations

from npa_infra.plan.graph import Cluster, Edge, EdgeKind, Graph, Node, NodeKind

__all__ = ["FORMATS", "dot", "dot_text", "mermaid", "mermaid_text", "render"]

FORMATS = ("mermaid", "dot")

_MERMAID_SPECIAL = frozenset('"#&<>|;%`')
_MERMAID_SHAPES = {
    NodeKind.START: ("((", "))"),
    NodeKind.END: ("((", "))"),
    NodeKind.TASK: ("[", "]"),
    NodeKind.DECISION: ("{", "}"),
    NodeKind.LOOP: ("{{", "}}"),
    NodeKind.SEQUENCE: ("([", "])"),
    NodeKind.PARALLEL: ("[[", "]]"),
}
_DOT_SHAPES = {
    NodeKind.START: "circle",
    NodeKind.END: "doublecircle",
    NodeKind.TASK: "box",
    NodeKind.DECISION: "diamond",
    NodeKind.LOOP: "hexagon",
    NodeKind.SEQUENCE: "box",
    NodeKind.PARALLEL: "box3d",
}
_INDENT = "    "


def mermaid_text(text: str) -> str:
    """``text`` escaped for a quoted Mermaid label."""
    return "".join(
        f"#{ord(ch)};" if ch in _MERMAID_SPECIAL or not ch.isprintable() else ch for ch in text
    )


def dot_text(text: str) -> str:
    """``text`` escaped for a quoted DOT label (one line)."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "&" or not ch.isprintable():
            out.append(f"&#{ord(ch)};")
        else:
            out.append(ch)
    return "".join(out)


def _mermaid_node(node: Node) -> str:
    opening, closing = _MERMAID_SHAPES[node.kind]
    label = "<br>".join(mermaid_text(line) for line in node.label)
    return f'{node.id}{opening}"{label}"{closing}'


def _mermaid_edge(edge: Edge) -> str:
    arrow = "-.->" if edge.kind is EdgeKind.LOOP_BACK else "-->"
    text = f'|"{mermaid_text(edge.label)}"|' if edge.label else ""
    return f"{edge.source} {arrow}{text} {edge.target}"


def _mermaid_cluster(cluster: Cluster, nodes: dict[str, Node], depth: int) -> list[str]:
    pad = _INDENT * depth
    lines = [f'{pad}subgraph {cluster.id}["{mermaid_text(cluster.label)}"]']
    lines += [f"{pad}{_INDENT}{_mermaid_node(nodes[n])}" for n in cluster.nodes]
    for inner in cluster.clusters:
        lines += _mermaid_cluster(inner, nodes, depth + 1)
    lines.append(f"{pad}end")
    return lines


def _clustered(clusters: tuple[Cluster, ...]) -> set[str]:
    found: set[str] = set()
    for cluster in clusters:
        found.update(cluster.nodes)
        found |= _clustered(cluster.clusters)
    return found


def mermaid(graph: Graph) -> str:
    """The graph as a Mermaid ``flowchart TD`` (GitHub renders it in a mermaid block)."""
    nodes = {n.id: n for n in graph.nodes}
    inside = _clustered(graph.clusters)
    lines = ["flowchart TD"]
    lines += [f"{_INDENT}{_mermaid_node(n)}" for n in graph.nodes if n.id not in inside]
    for cluster in graph.clusters:
        lines += _mermaid_cluster(cluster, nodes, 1)
    lines += [f"{_INDENT}{_mermaid_edge(e)}" for e in graph.edges]
    return "\n".join(lines) + "\n"


def _dot_node(node: Node) -> str:
    label = "\\n".join(dot_text(line) for line in node.label)
    style = ', style="rounded"' if node.kind is NodeKind.SEQUENCE else ""
    return f'"{node.id}" [label="{label}", shape={_DOT_SHAPES[node.kind]}{style}];'


def _dot_edge(edge: Edge) -> str:
    attrs = []
    if edge.label:
        attrs.append(f'label="{dot_text(edge.label)}"')
    if edge.kind is EdgeKind.LOOP_BACK:
        attrs.append("style=dashed")
    tail = f" [{', '.join(attrs)}]" if attrs else ""
    return f'"{edge.source}" -> "{edge.target}"{tail};'


def _dot_cluster(cluster: Cluster, nodes: dict[str, Node], depth: int) -> list[str]:
    pad = _INDENT * depth
    lines = [
        f'{pad}subgraph "cluster_{cluster.id}" {{',
        f'{pad}{_INDENT}label="{dot_text(cluster.label)}";',
        f'{pad}{_INDENT}style="rounded,dashed";',
    ]
    lines += [f"{pad}{_INDENT}{_dot_node(nodes[n])}" for n in cluster.nodes]
    for inner in cluster.clusters:
        lines += _dot_cluster(inner, nodes, depth + 1)
    lines.append(f"{pad}}}")
    return lines


def dot(graph: Graph) -> str:
    """The graph as a Graphviz ``digraph`` (``dot -Tsvg`` draws it)."""
    nodes = {n.id: n for n in graph.nodes}
    inside = _clustered(graph.clusters)
    lines = [f'digraph "{dot_text(graph.name)}" {{', f"{_INDENT}rankdir=TB;"]
    lines += [f"{_INDENT}{_dot_node(n)}" for n in graph.nodes if n.id not in inside]
    for cluster in graph.clusters:
        lines += _dot_cluster(cluster, nodes, 1)
    lines += [f"{_INDENT}{_dot_edge(e)}" for e in graph.edges]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph: Graph, fmt: str) -> str:
    """``graph`` in ``fmt`` (one of ``FORMATS``); ValueError for any other format."""
    if fmt == "mermaid":
        return mermaid(graph)
    if fmt == "dot":
        return dot(graph)
    raise ValueError(f"unknown graph format {fmt!r}")
