"""``pylayout.parse_shebang``: the interpreter a console script names, in every form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_infra.skypilot import pylayout

TRAMPOLINE = "#!/bin/sh\n'''exec' \"/very long/venv/bin/python\" \"$0\" \"$@\"\n' '''\nimport x\n"


@pytest.mark.parametrize(
    ("head", "interpreter", "flags", "on_path"),
    [
        ("#!/opt/venv/bin/python\n", "/opt/venv/bin/python", "", False),
        ("#! /usr/bin/python3.11 -IS\n", "/usr/bin/python3.11", "IS", False),
        ("#!/opt/conda/bin/python3\r\nimport sys\n", "/opt/conda/bin/python3", "", False),
        (TRAMPOLINE, "/very long/venv/bin/python", "", False),
        (
            "#!/bin/sh\n'''exec' '/v/bin/python' -s \"$0\" \"$@\"\n' '''\n",
            "/v/bin/python",
            "s",
            False,
        ),
        ("#!/usr/bin/env python\n", "python", "", True),
        ("#!/usr/bin/env -S python3 -I\n", "python3", "I", True),
    ],
    ids=["plain", "flags", "crlf", "trampoline", "trampoline-single-quotes", "env", "env-S"],
)
def test_parse_shebang_each_form_names_interpreter(
    head: str, interpreter: str, flags: str, on_path: bool
) -> None:
    shebang = pylayout.parse_shebang(head)
    assert shebang == pylayout.Shebang(interpreter, frozenset(flags), on_path)


@pytest.mark.parametrize(
    "head",
    [
        "",
        "import sys\n",
        '#!/bin/sh\nexec /opt/sky/bin/sky "$@"\n',
        "#!/bin/bash\n",
        "#!python3\n",  # relative: the kernel resolves it from each call's cwd
        "#!/usr/bin/env node\n",
        "#!/bin/sh\n'''exec' python \"$0\" \"$@\"\n",
        "#!/bin/sh\n'''exec' \"unterminated\n",
    ],
    ids=[
        "empty",
        "no-shebang",
        "shell",
        "bash",
        "relative",
        "env-node",
        "relative-exec",
        "bad-quote",
    ],
)
def test_parse_shebang_no_python_none(head: str) -> None:
    assert pylayout.parse_shebang(head) is None


@given(st.text(max_size=300))
def test_parse_shebang_any_text_none_or_absolute_or_path_name(head: str) -> None:
    shebang = pylayout.parse_shebang(head)
    if shebang is not None:
        assert shebang.on_path or shebang.interpreter.startswith("/")
        assert shebang.interpreter.rsplit("/", 1)[-1].startswith("python")
