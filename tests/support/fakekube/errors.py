"""The API error the double raises internally, and the ``Status`` body it becomes (kubernetes.md §5.2)."""

from __future__ import annotations

from typing import Any

__all__ = ["REASONS", "ApiError", "FakeKubeError", "status_body"]

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class FakeKubeError(RuntimeError):
    """A test used the control API wrongly (unknown pod, bad argument): a bug in the test."""


def status_body(
    code: int,
    reason: str,
    message: str,
    *,
    name: str | None = None,
    kind: str | None = None,
    group: str | None = None,
    retry_after: int | None = None,
) -> dict[str, Any]:
    """A ``Status`` object exactly as the API server writes it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    details: dict[str, Any] = {}
    if name is not None:
        details["name"] = name
    if group:
        details["group"] = group
    if kind is not None:
        details["kind"] = kind
    if retry_after is not None:
        details["retryAfterSeconds"] = retry_after
    if details:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """An API answer other than success; the server turns it into a ``Status`` body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        kind: str | None = None,
        group: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.name = name
        self.kind = kind
        self.group = group
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return status_body(
            self.code,
            self.reason,
            self.message,
            name=self.name,
            kind=self.kind,
            group=self.group,
            retry_after=self.retry_after,
        )

    @classmethod
    def not_found(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            404,
            "NotFound",
            f'{qualified} "{name}" not found',
            name=name,
            kind=resource,
            group=group,
        )

    @classmethod
    def already_exists(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            409,
            "AlreadyExists",
            f'{qualified} "{name}" already exists',
            name=name,
            kind=resource,
            group=group,
        )

    @classmethod
    def conflict(cls, resource: str, name: str, why: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
            name=name,
            kind=resource,
            group=group,
        )

    @classmethod
    def invalid(cls, kind: str, name: str, why: str, group: str = "") -> ApiError:
        return cls(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: {why}',
            name=name,
            kind=kind,
            group=group,
        )

    @classmethod
    def forbidden(cls, resource: str, name: str, why: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        subject = f'{qualified} "{name}"' if name else qualified
        return cls(
            403,
            "Forbidden",
            f"{subject} is forbidden: {why}",
            name=name or None,
            kind=resource,
            group=group,
        )
