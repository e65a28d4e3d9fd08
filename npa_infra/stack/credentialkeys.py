"""Where a stack-backed project's credentials live: secret config of its stack (issue 17).

``npa configure`` stores each credential ``NAME`` of a project bound to a stack
as the stack's secret config ``npa-credentials:NAME`` (the engine encrypts it
into ``stacks/Pulumi.<stack>.yaml`` as ``{secure: …}``). Its own namespace keeps
it apart from the keys the stack program reads (``npa-infra:``), which
``config.load_stack_file`` validates and would refuse.

``names`` reads which credentials a stack holds from that file, without the
engine and without decrypting anything, so ``--show`` and ``submit --plan-only``
work with no ``pulumi`` binary; values are decrypted only by the engine
(``api.secret_config``).
"""

from __future__ import annotations

from pathlib import Path

from npa_infra.errors import ConfigError
from npa_infra.spec import source
from npa_infra.spec.issues import SpecIssue
from npa_infra.stack import config as stack_config

__all__ = ["NAMESPACE", "key", "names"]

NAMESPACE = "npa-credentials"


def key(name: str) -> str:
    """The stack config key of credential ``name``."""
    return f"{NAMESPACE}:{name}"


def names(stack: str, root: Path) -> frozenset[str]:
    """The credential names stack ``stack``'s file holds encrypted (none when it has no file).

    Raises:
        ConfigError: the stack name is unusable, or its file is not a YAML mapping.
    """
    path = stack_config.stack_file_path(stack, root)
    if not path.is_file():
        return frozenset()
    loaded = source.load_file(path)
    if isinstance(loaded, SpecIssue):
        raise ConfigError(
            f"stack file {path} cannot be read: {loaded.message}", remedy=f"fix {path}"
        )
    data = loaded.data if isinstance(loaded.data, dict) else {}
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    assert isinstance(config, dict)  # narrowed above, for mypy
    prefix = f"{NAMESPACE}:"
    return frozenset(
        k.removeprefix(prefix)
        for k, v in config.items()
        if isinstance(k, str)
        and k.startswith(prefix)
        and isinstance(v, dict)
        and isinstance(v.get("secure"), str)
    )
