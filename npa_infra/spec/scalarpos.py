"""Where a character of a scalar's value is in the YAML source (issue 18).

A bad token is reported at its own line and column, not at the start of the
value that holds it. The loader records where each scalar starts; this module
walks the source from there, character by character, to the one at an offset
of the value as YAML produced it.

YAML styles change only whitespace (line folding, block indentation, the
spaces of continuation lines) and, in quoted styles, escapes (``\\"``, ``\\x41``,
``''``). So the walk skips whitespace on both sides and matches every other
character in order, decoding escapes as the style does. Anything it cannot
match exactly (an anchor or tag before the value, an unknown escape, a value
that does not come from this source) gives ``None``: the caller then keeps the
value's start, which is never wrong, only less precise.
"""

from __future__ import annotations

from collections.abc import Sequence

from npa_infra.spec.source import Position

__all__ = ["locate"]

_ESCAPES = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


class _Walk:
    """A cursor over the source lines that yields the value's characters one by one."""

    def __init__(self, lines: Sequence[str], row: int, col: int, style: str) -> None:
        self.lines = lines
        self.row = row
        self.col = col
        self.style = style

    def _unit(self) -> tuple[str, int] | None:
        """(character produced, source length) at the cursor; None at a closing quote."""
        line = self.lines[self.row]
        ch = line[self.col]
        if self.style == '"':
            if ch == '"':
                return None
            if ch == "\\":
                return _escape(line, self.col)
        if self.style == "'" and ch == "'":
            return ("'", 2) if line[self.col + 1 : self.col + 2] == "'" else None
        return ch, 1

    def next_content(self) -> tuple[str, int] | None:
        """Move past whitespace (and escapes or line joins that make only whitespace)."""
        while self.row < len(self.lines):
            line = self.lines[self.row]
            if self.col >= len(line):
                self.row, self.col = self.row + 1, 0
                continue
            if self.style == '"' and line[self.col] == "\\" and self.col + 1 == len(line):
                self.row, self.col = self.row + 1, 0  # an escaped line break joins lines
                continue
            unit = self._unit()
            if unit is None:
                return None
            if not unit[0].isspace():
                return unit
            self.col += unit[1]
        return None


def _escape(line: str, col: int) -> tuple[str, int] | None:
    """The character a double-quoted escape at ``col`` produces, and its length."""
    kind = line[col + 1 : col + 2]
    if kind in _ESCAPES:
        return _ESCAPES[kind], 2
    width = _HEX_DIGITS.get(kind)
    digits = line[col + 2 : col + 2 + width] if width else ""
    if not width or len(digits) != width:
        return None
    try:
        return chr(int(digits, 16)), 2 + width
    except ValueError:
        return None


def _start(lines: Sequence[str], start: Position) -> _Walk | None:
    row, col = start.line - 1, start.column - 1
    if not 0 <= row < len(lines) or not 0 <= col < len(lines[row]):
        return None
    first = lines[row][col]
    if first in "&!*":  # an anchor, a tag or an alias: not the value's own text
        return None
    if first in "\"'":
        return _Walk(lines, row, col + 1, first)
    if first in "|>":  # a block scalar's content starts on the line after its header
        return _Walk(lines, row + 1, 0, "block")
    return _Walk(lines, row, col, "plain")


def locate(lines: Sequence[str], start: Position, text: str, offset: int) -> Position | None:
    """The position of ``text[offset]`` in the scalar that starts at ``start``, or None.

    ``text`` is the value as loaded; ``lines`` the source. An offset on
    whitespace moves to the next character that is not; None when no exact
    match is possible (the caller falls back to ``start``).
    """
    while offset < len(text) and text[offset].isspace():
        offset += 1
    walk = _start(lines, start) if 0 <= offset < len(text) else None
    if walk is None:
        return None
    for index, wanted in enumerate(text[: offset + 1]):
        if wanted.isspace():
            continue
        unit = walk.next_content()
        if unit is None or unit[0] != wanted:
            return None
        if index == offset:
            return Position(walk.row + 1, walk.col + 1)
        walk.col += unit[1]
    return None
