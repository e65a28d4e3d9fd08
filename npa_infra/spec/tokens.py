"""Token substitution: ``{{ scope.key }}`` and ``{{ scope.key|base64 }}``.

Only the scopes ``config``, ``run``, ``state`` and ``loop`` are substituted
(dsl.md §2). Anything else in double braces (``{{params.x}}``, a Python dict
literal) is literal text and survives unchanged. Resolution is pure: the
caller passes every value the tokens may read.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "TOKEN_RE",
    "TokenContext",
    "TokenError",
    "find_tokens",
    "malformed",
    "problems",
    "resolve",
    "stringify",
]

TOKEN_RE = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*(?:\|\s*([^{}\s]*)\s*)?\}\}")
SCOPES = frozenset({"config", "run", "state", "loop"})
_OUTPUT_FIELD = re.compile(r"^(uri|output_[1-9][0-9]*)$")
_BRACES = re.compile(r"\{\{|\}\}")
# what a person meant as a token: a substituted scope right after '{{' ...
_TOKEN_START = re.compile(r"\{\{\s*(?:config|run|state|loop)\.")
# ... or right before '}}' without its '{{' (``{config.x}}``, ``config.x}}``)
_TOKEN_END = re.compile(r"(?<!\{)\{?\s*\b(?:config|run|state|loop)\.[A-Za-z0-9_.-]*\s*\}\}")


class TokenError(Exception):
    """A token that names a substituted scope cannot be resolved."""

    def __init__(self, message: str, *, token: str, scope: str) -> None:
        super().__init__(message)
        self.message = message
        self.token = token
        self.scope = scope
        self.offset: int | None = None  # where the token starts in its text (``problems``)


@dataclass(slots=True)
class TokenContext:
    """Everything tokens may read; ``state_outputs`` maps state → field → uri."""

    config: Mapping[str, object]
    run: Mapping[str, object]
    state_outputs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    loop_iterations: Mapping[str, int] = field(default_factory=dict)
    allow_state: bool = True
    allow_loop: bool = True


def stringify(value: object) -> str:
    """How a resolved value becomes text: Python's ``str`` (so ``True``/``False``)."""
    return value if isinstance(value, str) else str(value)


def find_tokens(text: str) -> list[tuple[str, str, str]]:
    """(whole token, scope, key) of every substituted-scope token in ``text``."""
    found = []
    for match in TOKEN_RE.finditer(text):
        name = match.group(1)
        scope, _, rest = name.partition(".")
        if scope in SCOPES:
            found.append((match.group(0), scope, rest))
    return found


def _lookup_config(config: Mapping[str, object], key: str) -> object:
    if key in config:
        return config[key]
    node: object = config
    for part in key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            raise KeyError(key)
    return node


def _value(scope: str, key: str, whole: str, ctx: TokenContext) -> object:
    if not key:
        raise TokenError(f"token {whole} names no key", token=whole, scope=scope)
    if scope == "config":
        try:
            return _lookup_config(ctx.config, key)
        except KeyError:
            raise TokenError(
                f"token {whole}: config has no key '{key}'", token=whole, scope=scope
            ) from None
    if scope == "run":
        if key in ctx.run:
            return ctx.run[key]
        raise TokenError(f"token {whole}: run has no key '{key}'", token=whole, scope=scope)
    if scope == "loop":
        if not ctx.allow_loop:
            raise TokenError(
                f"token {whole}: loop tokens are not allowed here", token=whole, scope=scope
            )
        if key in ctx.loop_iterations:
            return ctx.loop_iterations[key]
        raise TokenError(
            f"token {whole}: no loop named '{key}' is active", token=whole, scope=scope
        )
    # state.NAME.uri | state.NAME.output_N
    if not ctx.allow_state:
        raise TokenError(
            f"token {whole}: state tokens are not allowed here", token=whole, scope=scope
        )
    name, _, fld = key.rpartition(".")
    if not name or not _OUTPUT_FIELD.match(fld):
        raise TokenError(
            f"token {whole}: expected state.NAME.uri or state.NAME.output_N",
            token=whole,
            scope=scope,
        )
    outputs = ctx.state_outputs.get(name)
    if outputs is None:
        raise TokenError(
            f"token {whole}: state '{name}' has not run before this point", token=whole, scope=scope
        )
    if fld not in outputs:
        raise TokenError(f"token {whole}: state '{name}' has no {fld}", token=whole, scope=scope)
    return outputs[fld]


def malformed(text: str) -> list[tuple[int, str]]:
    """(offset, message) of every ``{{ }}`` a person meant as a token that is not one.

    The offset is of the braces at fault: the unclosed ``{{``, the malformed
    token's ``{{``, the stray ``}}``.

    Double braces are otherwise literal text (a Python ``{{"k": v}}``, code
    ending in ``}}``), so only three shapes are errors: a ``{{`` that is never
    closed, a ``{{scope.`` that is not a well-formed token, and a ``}}`` that ends
    a scope reference whose ``{{`` is missing.
    """
    if "{{" not in text and "}}" not in text:
        return []
    found: list[tuple[int, str]] = []
    opens: list[int] = []
    for match in _BRACES.finditer(text):
        if match.group(0) == "{{":
            opens.append(match.start())
        elif opens:
            opens.pop()
    found.extend((at, f"unclosed '{{{{' at offset {at}: {_excerpt(text, at)}") for at in opens)
    tokens_at = {m.start(): m.end() for m in TOKEN_RE.finditer(text)}
    ends = set(tokens_at.values())
    for match in _TOKEN_START.finditer(text):
        if match.start() not in tokens_at and match.start() not in opens:
            at = match.start()
            found.append((at, f"malformed token at offset {at}: {_excerpt(text, at)}"))
    for match in _TOKEN_END.finditer(text):
        if match.end() not in ends:
            at = match.end() - 2
            found.append((at, f"stray '}}}}' at offset {at}: {_excerpt(text, match.start())}"))
    return sorted(found)


def _excerpt(text: str, at: int) -> str:
    piece = text[at : at + 40].splitlines()[0] if text[at:] else ""
    return repr(piece + ("…" if len(text) > at + 40 else ""))


def problems(text: str, ctx: TokenContext) -> list[TokenError]:
    """Every token of ``text`` that cannot be resolved, in order (``resolve`` stops at the first)."""
    out: list[TokenError] = []
    for match in TOKEN_RE.finditer(text):
        try:
            _substitute(match, ctx)
        except TokenError as exc:
            exc.offset = match.start()
            # kept without its traceback and the suppressed KeyError (``from None``): either
            # holds this frame, which holds ``out``, a cycle only the collector frees, and
            # it is paused while a spec is validated (issue 19)
            exc.__context__ = None
            out.append(exc.with_traceback(None))
    return out


def resolve(text: str, ctx: TokenContext) -> str:
    """Substitute every token of a substituted scope; raise ``TokenError`` on the first bad one."""
    if "{{" not in text:
        return text
    return TOKEN_RE.sub(lambda match: _substitute(match, ctx), text)


def _substitute(match: re.Match[str], ctx: TokenContext) -> str:
    """The text one token match becomes; raise ``TokenError`` when it cannot resolve."""
    name, transform = match.group(1), match.group(2)
    scope, _, key = name.partition(".")
    if scope not in SCOPES:
        return match.group(0)
    whole = match.group(0)
    if transform is not None and transform != "base64":
        raise TokenError(
            f"token {whole}: unknown transform '{transform}' (only 'base64' is supported)",
            token=whole,
            scope=scope,
        )
    value = stringify(_value(scope, key, whole, ctx))
    if transform == "base64":
        try:
            # surrogateescape keeps bytes that came in through argv
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise TokenError(
                f"token {whole}: the value is not valid text and cannot be base64-encoded",
                token=whole,
                scope=scope,
            ) from None
        return base64.b64encode(raw).decode("ascii")
    return value
