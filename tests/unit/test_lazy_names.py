"""npa_infra._lazy_resolver: a package's names resolve from their modules on first use."""

from __future__ import annotations

import pytest

from npa_infra import _lazy_resolver


def test_resolver_finds_a_name_in_its_home_module() -> None:
    resolve = _lazy_resolver("pkg", {"dumps": "json"})
    import json

    assert resolve("dumps") is json.dumps


def test_resolver_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    resolve = _lazy_resolver("pkg", {"dumps": "json"})
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        resolve("loads")
