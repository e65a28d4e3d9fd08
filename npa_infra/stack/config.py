"""A stack's configuration: typed, validated, and located (pulumi.md §3, cli.md §0).

``stacks/Pulumi.<name>.yaml`` holds the keys under the ``npa-infra:``
namespace. ``load_stack_file`` reads it with line and column positions (the
spec loader, ``spec/source.py``) and validates it with one pydantic model,
``StackConfig``; every mistake becomes one located issue, and all of them
are raised together as a ``StackConfigError``. The same model validates the
values the Pulumi engine hands a program (``from_values``), so ``npa stack``,
a plain ``pulumi preview -s dev`` and ``submit --plan-only`` (which needs no
engine) agree on what a stack means.

Secret values (registry passwords) are never read here: the file holds them
encrypted (``{secure: …}``) and only the engine decrypts them. A password key
written in clear is itself a mistake.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from npa_infra.errors import ConfigError, StackConfigError, StorageError
from npa_infra.spec import source
from npa_infra.spec.issues import SpecIssue
from npa_infra.storage.models import S3Uri

__all__ = [
    "DEFAULT_PULL_SECRET",
    "NAMESPACE",
    "PROJECT",
    "LoadedStack",
    "RegistryConfig",
    "StackConfig",
    "find_project_root",
    "from_values",
    "load_stack_file",
    "require_engine_fields",
    "stack_file_path",
    "validate_stack_name",
]

NAMESPACE = "npa-infra"
PROJECT = "npa-infra"
DEFAULT_PULL_SECRET = "npa-nebius-registry"  # the name the renderer implies (render/tasks.py)
DEFAULT_PASSWORD_KEY = "registryPassword"
_STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_REGISTRY_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$")
_CONFIG_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# skypilot-0.12.md §9.2: these remote_identity values mean SkyPilot's own account.
_SKYPILOT_IDENTITIES = frozenset({"SERVICE_ACCOUNT", "LOCAL_CREDENTIALS", "NO_UPLOAD"})


class RegistryConfig(BaseModel):
    """One private registry: its host, user, the config key of its secret password, its Secret."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    server: str
    username: str
    password_key: str = DEFAULT_PASSWORD_KEY
    secret_name: str = ""

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        value = value.strip()
        if "://" in value:
            raise ValueError(
                f"write the registry host without a scheme (e.g. {value.split('://', 1)[1]!r})"
            )
        if not _REGISTRY_HOST.match(value):
            raise ValueError(f"{value!r} is not a registry host[:port]")
        return value

    @field_validator("username")
    @classmethod
    def _username(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the registry username is empty")
        return value

    @field_validator("password_key")
    @classmethod
    def _password_key(cls, value: str) -> str:
        if not _CONFIG_KEY.match(value):
            raise ValueError(f"{value!r} is not a config key name (letters, digits, '_')")
        return value

    @field_validator("secret_name")
    @classmethod
    def _secret_name(cls, value: str) -> str:
        if value and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError(f"{value!r} is not a Kubernetes Secret name (DNS-1123 subdomain)")
        return value


class StackConfig(BaseModel):
    """Everything a stack declares; field ``foo_bar`` is the key ``npa-infra:fooBar``."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    context: str = ""
    namespace: str = ""
    extra_namespaces: tuple[str, ...] = ()
    adopt_namespaces: bool = False
    protect_namespaces: bool = True
    service_account: str = ""
    registry: str = ""  # the catalog images' registry (imagecheck.catalog_registry)
    registries: tuple[RegistryConfig, ...] = ()
    bucket: str = ""
    source_prefix: str = "npa-src/npa"
    source_dir: str = "."
    delete_source_on_destroy: bool = False
    s3_endpoint: str = ""
    controller_cpus: int = 2
    controller_memory_gb: int = 8
    controller_pod_config: dict[str, JsonValue] | None = None
    sky_bin: str = ""
    state_dir: str = ""

    @field_validator("context")
    @classmethod
    def _context(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("the context name has surrounding whitespace")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if value and not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a namespace name (DNS-1123 label)")
        return value

    @field_validator("extra_namespaces")
    @classmethod
    def _extra(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _DNS_LABEL.match(name):
                raise ValueError(f"{name!r} is not a namespace name (DNS-1123 label)")
        if len(set(value)) != len(value):
            raise ValueError("a namespace is listed twice")
        return value

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str) -> str:
        if value in _SKYPILOT_IDENTITIES:
            raise ValueError(
                f"{value} means SkyPilot's own skypilot-service-account; leave the key out "
                "for that, or name the account this stack should create"
            )
        if value and (len(value) > 253 or not _DNS_SUBDOMAIN.match(value)):
            raise ValueError(f"{value!r} is not a ServiceAccount name (DNS-1123 subdomain)")
        return value

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        if value:
            try:
                S3Uri.parse(f"s3://{value}/k")
            except StorageError as exc:
                raise ValueError(exc.message.split(": ", 1)[-1]) from None
        return value

    @field_validator("source_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        value = value.strip("/")  # "" stages at the bucket's root (source.decision.prefix_uri)
        if ".." in value.split("/") or "//" in value:
            raise ValueError(f"{value!r} is not a key prefix (e.g. npa-src/npa)")
        return value

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("controller_cpus", "controller_memory_gb", mode="before")
    @classmethod
    def _positive(cls, value: object) -> int:
        try:
            number = int(str(value))
        except ValueError:
            number = 0
        if isinstance(value, bool) or number < 1:
            raise ValueError(f"must be a positive integer, got {value!r}")
        return number

    @field_validator("controller_pod_config", mode="before")
    @classmethod
    def _pod_config(cls, value: object) -> object:
        if value is not None and not isinstance(value, dict):
            raise ValueError("must be a mapping (a partial Pod manifest), e.g. {spec: {...}}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_secret_names(cls, data: Any) -> Any:
        """The first registry's Secret is ``npa-nebius-registry``; later ones are numbered."""
        if not isinstance(data, dict) or not isinstance(data.get("registries"), list):
            return data
        named = []
        for index, entry in enumerate(data["registries"]):
            if isinstance(entry, dict) and not entry.get("secretName"):
                default = DEFAULT_PULL_SECRET if index == 0 else f"npa-registry-{index}"
                entry = {**entry, "secretName": default}
            named.append(entry)
        return {**data, "registries": named}

    @model_validator(mode="after")
    def _distinct(self) -> StackConfig:
        if self.namespace in self.extra_namespaces:
            raise ValueError(f"extraNamespaces repeats the main namespace {self.namespace!r}")
        seen_names: set[str] = set()
        seen_keys: set[str] = set()
        for entry in self.registries:
            if entry.secret_name in seen_names:
                raise ValueError(f"two registries share the Secret name {entry.secret_name!r}")
            if entry.password_key in seen_keys:
                raise ValueError(f"two registries share the password key {entry.password_key!r}")
            seen_names.add(entry.secret_name)
            seen_keys.add(entry.password_key)
        return self

    # -- derived values ------------------------------------------------------------
    @property
    def namespaces(self) -> tuple[str, ...]:
        """The main namespace first, then the extra ones."""
        return (self.namespace, *self.extra_namespaces) if self.namespace else ()

    @property
    def pull_secret_names(self) -> tuple[str, ...]:
        return tuple(r.secret_name for r in self.registries)

    @property
    def password_keys(self) -> tuple[str, ...]:
        return tuple(r.password_key for r in self.registries)


_FIELD_KEYS = {to_camel(name): name for name in StackConfig.model_fields}


class LoadedStack(NamedTuple):
    """A validated stack file: the model, where it came from, and its secrets provider."""

    name: str
    path: Path
    config: StackConfig
    secrets_provider: str  # "" = the file names none (passphrase, the embedded default)
    encrypted: bool  # the file carries a passphrase salt or an encrypted key
    secure_keys: frozenset[str] = frozenset()  # keys (without namespace) holding {secure: …}


def validate_stack_name(name: str) -> str:
    """Raises ConfigError: the name cannot name a stack file and state directory."""
    if not _STACK_NAME.match(name):
        raise ConfigError(
            f"stack name {name!r} is not usable",
            remedy="use letters, digits and '-' (at most 63), e.g. --stack dev",
        )
    return name


def stack_file_path(name: str, root: Path) -> Path:
    return root / "stacks" / f"Pulumi.{validate_stack_name(name)}.yaml"


def find_project_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` whose ``Pulumi.yaml`` is this project's.

    Raises:
        ConfigError: none is found, not even beside the installed package.
    """
    package_root = Path(__file__).resolve().parents[2]
    for candidate in (start.resolve(), *start.resolve().parents, package_root):
        marker = candidate / "Pulumi.yaml"
        if marker.is_file() and _names_project(marker):
            return candidate
    raise ConfigError(
        f"no Pulumi.yaml of project {PROJECT!r} at or above {start}",
        remedy="run from the npa-infra checkout (it holds Pulumi.yaml and stacks/)",
    )


def _names_project(path: Path) -> bool:
    loaded = source.load_file(path)
    return (
        not isinstance(loaded, SpecIssue)
        and isinstance(loaded.data, dict)
        and loaded.data.get("name") == PROJECT
    )


def load_stack_file(name: str, root: Path, *, config_file: Path | None = None) -> LoadedStack:
    """Read and validate ``stacks/Pulumi.<name>.yaml`` (or ``config_file``).

    Raises:
        ConfigError: the file is missing.
        StackConfigError: the file is not YAML, or any key is wrong (all issues, located).
    """
    path = config_file or stack_file_path(name, root)
    label = str(path)
    if not path.is_file():
        raise ConfigError(
            f"stack '{name}' has no configuration file at {path}",
            remedy=f"create {path} (see stacks/Pulumi.dev.yaml) or pass an existing --stack",
        )
    loaded = source.load_file(path)
    if isinstance(loaded, SpecIssue):
        raise StackConfigError([loaded], source=label)
    data = loaded.data if loaded.data is not None else {}
    if not isinstance(data, dict):
        raise StackConfigError([_at(loaded, (), "the file is not a mapping")], source=label)
    raw = data.get("config") or {}
    if not isinstance(raw, dict):
        issue = _at(loaded, ("config",), "config: must be a mapping of keys")
        raise StackConfigError([issue], source=label)
    values, issues = _own_values(raw, loaded)
    issues = [*loaded.issues, *issues]  # keys written twice
    config, problems = _validate(values, lambda path: loaded.source_map.locate(path))
    issues += problems
    if issues or config is None:
        raise StackConfigError(issues, source=label)
    provider = data.get("secretsprovider")
    return LoadedStack(
        name=name,
        path=path,
        config=config,
        secrets_provider=provider if isinstance(provider, str) else "",
        encrypted=bool(data.get("encryptionsalt") or data.get("encryptedkey")),
        secure_keys=frozenset(
            str(k).removeprefix(f"{NAMESPACE}:")
            for k, v in raw.items()
            if isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("secure"), str)
        ),
    )


def from_values(
    values: Mapping[str, Any], *, label: str = "the stack's Pulumi config"
) -> StackConfig:
    """Validate values keyed without the namespace (``context``, ``controllerCpus``…).

    The Pulumi program uses this with what the engine passes it.

    Raises:
        StackConfigError: any key is wrong (issues carry no file position).
    """
    config, issues = _validate(dict(values), lambda path: source.Position(0, 0))
    if issues or config is None:
        raise StackConfigError(issues, source=label)
    return config


def require_engine_fields(
    cfg: StackConfig, *, label: str, secure_keys: frozenset[str] | None = None
) -> None:
    """``npa stack`` needs an exact context, a namespace and every registry password.

    ``submit --plan-only`` needs none of them. ``secure_keys`` are the password
    keys the file holds encrypted; ``None`` skips that check (the engine's own
    config is the judge then).

    Raises:
        StackConfigError: one issue per missing key.
    """
    issues = [
        SpecIssue(
            f"{NAMESPACE}:{key}",
            "is required by npa stack, and the configuration does not set it",
            hint=f"add `{NAMESPACE}:{key}: <value>` under config:",
        )
        for key in ("context", "namespace")
        if not getattr(cfg, key)
    ]
    if secure_keys is not None:
        issues += [
            SpecIssue(
                f"{NAMESPACE}:{key}",
                f"registry {registry.server} has no password in the stack's secret config",
                hint=f"pulumi config set --secret {NAMESPACE}:{key} <password> --stack <name>",
            )
            for registry in cfg.registries
            if (key := registry.password_key) not in secure_keys
        ]
    if issues:
        raise StackConfigError(issues, source=label)


# -- internals -----------------------------------------------------------------------


def _at(loaded: source.LoadedDocument, path: tuple[str | int, ...], message: str) -> SpecIssue:
    pos = loaded.source_map.locate(path, key=True)
    return SpecIssue(source.json_path(path), message, line=pos.line, column=pos.column)


def _own_values(
    raw: dict[Any, Any], loaded: source.LoadedDocument
) -> tuple[dict[str, Any], list[SpecIssue]]:
    """Our keys without the namespace; unknown ``npa-infra:`` keys and clear passwords are issues."""
    password_keys = _declared_password_keys(raw.get(f"{NAMESPACE}:registries"))
    values: dict[str, Any] = {}
    issues: list[SpecIssue] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key.startswith(f"{NAMESPACE}:"):
            continue  # other providers' keys (kubernetes:…, pulumi:…) are theirs to check
        short = key.removeprefix(f"{NAMESPACE}:")
        pos = loaded.source_map.locate(("config", key), key=True)
        if short in password_keys:
            if not (isinstance(value, dict) and isinstance(value.get("secure"), str)):
                issues.append(
                    SpecIssue(
                        key,
                        "a registry password is written in clear",
                        hint=f"remove it, then: pulumi config set --secret {key} <password>",
                        line=pos.line,
                        column=pos.column,
                    )
                )
            continue
        if short not in _FIELD_KEYS:
            close = difflib.get_close_matches(short, list(_FIELD_KEYS), n=1)
            hint = (
                f"did you mean {NAMESPACE}:{close[0]}?" if close else "see stacks/Pulumi.dev.yaml"
            )
            issues.append(
                SpecIssue(key, "is not a key npa-infra knows", hint, pos.line, pos.column)
            )
            continue
        values[short] = value
    return values, issues


def _declared_password_keys(registries: object) -> set[str]:
    keys = {DEFAULT_PASSWORD_KEY}
    if isinstance(registries, list):
        for entry in registries:
            if isinstance(entry, dict) and isinstance(entry.get("passwordKey"), str):
                keys.add(entry["passwordKey"])
    return keys


def _validate(
    values: dict[str, Any], locate: Callable[[tuple[str | int, ...]], source.Position]
) -> tuple[StackConfig | None, list[SpecIssue]]:
    try:
        return StackConfig.model_validate(values), []
    except ValidationError as exc:
        issues = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            label = _label(loc)
            pos = locate(("config", f"{NAMESPACE}:{loc[0]}", *loc[1:]) if loc else ("config",))
            message = str(error["msg"]).removeprefix("Value error, ")
            issues.append(
                SpecIssue(label, message, hint=_hint(loc), line=pos.line, column=pos.column)
            )
        return None, issues


def _label(loc: tuple[str | int, ...]) -> str:
    if not loc:
        return f"{NAMESPACE}:*"
    out = f"{NAMESPACE}:{loc[0]}"
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _hint(loc: tuple[str | int, ...]) -> str:
    key = str(loc[0]) if loc else ""
    return {
        "controllerCpus": "set it to 1 or more",
        "controllerMemoryGb": "set it to 1 or more (GiB)",
        "controllerPodConfig": "write it as a YAML mapping, e.g. {spec: {priorityClassName: x}}",
        "registries": "each entry: {server: host[:port], username: u, passwordKey: k}",
        "namespace": "lowercase letters, digits and '-', at most 63 characters",
        "serviceAccount": "lowercase letters, digits, '-' and '.'",
    }.get(key, "")
