"""The input rules every backend shares (kubecoord.validation)."""

from __future__ import annotations

import pytest

from kubecoord import InvalidArgumentError, ValueTooLargeError
from kubecoord import validation as v


@pytest.mark.parametrize("name", ["a", "billing-controller", "x1", "a" * 63, "0abc"])
def test_valid_names(name: str) -> None:
    assert v.check_name(name) == name


@pytest.mark.parametrize("name", ["", "A", "a_b", "-a", "a-", "a.b", "a" * 64, "ä", 5, None])
def test_invalid_names(name: object) -> None:
    with pytest.raises(InvalidArgumentError, match="name"):
        v.check_name(name)


@pytest.mark.parametrize("key", ["a", "a/b/c", "with space", "ключ/🔑", "a.b/..c/c..", "%2F", "a" * 512])
def test_valid_keys(key: str) -> None:
    assert v.check_key(key) == key


@pytest.mark.parametrize(
    "key", ["", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "nul\x00", "bell\x07", "del\x7f", "a" * 513, "\ud800"]
)
def test_invalid_keys(key: str) -> None:
    with pytest.raises(InvalidArgumentError):
        v.check_key(key)


def test_key_length_counts_utf8_bytes() -> None:
    v.check_key("é" * 256)  # 512 bytes
    with pytest.raises(InvalidArgumentError, match="513 bytes"):
        v.check_key("é" * 256 + "x")


@pytest.mark.parametrize("ident", ["pod-a", "Pod A", "host:1234", "ünï", "x" * 128])
def test_valid_ids(ident: str) -> None:
    assert v.check_id(ident) == ident


@pytest.mark.parametrize("ident", ["", "a/b", "x" * 129, "tab\t", 7])
def test_invalid_ids(ident: object) -> None:
    with pytest.raises(InvalidArgumentError):
        v.check_id(ident)


def test_values_and_data() -> None:
    assert v.check_value("", max_bytes=0) == ""
    assert v.check_value("nul\x00ok", max_bytes=10) == "nul\x00ok"
    with pytest.raises(ValueTooLargeError, match="stores at most 3"):
        v.check_value("abcd", max_bytes=3)
    with pytest.raises(InvalidArgumentError, match="Unicode"):
        v.check_value("\udc80", max_bytes=10)
    with pytest.raises(InvalidArgumentError, match="str"):
        v.check_value(b"bytes", max_bytes=10)
    with pytest.raises(ValueTooLargeError):
        v.check_data("x" * (v.MAX_DATA_BYTES + 1))


@pytest.mark.parametrize("version", [0, -1, True, 1.0, "1"])
def test_invalid_expected_versions(version: object) -> None:
    with pytest.raises(InvalidArgumentError):
        v.check_version(version)


def test_namespaces_and_children() -> None:
    assert v.check_namespace("") == ""
    with pytest.raises(InvalidArgumentError):
        v.check_namespace("/")
    assert v.parent_of("a/b/c") == "a/b"
    assert v.parent_of("a") == ""
    assert v.child_name("", "a/b") == "a"
    assert v.child_name("a", "a/b/c") == "b"
    assert v.child_name("a", "ab/c") is None
    assert v.child_name("a", "a") is None
