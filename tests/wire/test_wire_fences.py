"""kubecoord.wire.fences: the fencing rule and the marks' stored form (format 1)."""

from __future__ import annotations

import pytest

from kubecoord.errors import CoordinationError, FencedError, UnsupportedFeatureError
from kubecoord.wire import fences


def test_a_lower_token_is_refused_an_equal_one_changes_nothing_a_higher_one_raises_the_mark() -> None:
    marks = {"job": 5, "other": 1}
    with pytest.raises(FencedError) as refused:
        fences.admit(marks, "job", 4, where="store 's'")
    assert (refused.value.name, refused.value.token, refused.value.accepted) == ("job", 4, 5)
    assert "store 's'" in str(refused.value)
    assert fences.admit(marks, "job", 5, where="s") is None
    assert fences.admit(marks, "job", 6, where="s") == {"job": 6, "other": 1}
    assert fences.admit(marks, "new", 0, where="s") == {"job": 5, "other": 1, "new": 0}
    assert marks == {"job": 5, "other": 1}  # never changed in place


def test_the_stored_form_round_trips_and_says_its_format() -> None:
    text = fences.encode({"b": 2, "a": 9_000_000_000})
    assert text == '{"format":1,"tokens":{"a":9000000000,"b":2}}'
    assert fences.decode(text, where="s") == {"a": 9_000_000_000, "b": 2}
    assert fences.decode(text.encode(), where="s") == {"a": 9_000_000_000, "b": 2}
    for nothing in (None, "", b""):
        assert fences.decode(nothing, where="s") == {}


def test_an_unknown_format_or_a_malformed_body_is_never_read_as_no_marks() -> None:
    with pytest.raises(UnsupportedFeatureError, match="format 2"):
        fences.decode('{"format":2,"tokens":{}}', where="s")
    for bad in ("not json", "[1]", '{"format":1,"tokens":{"a":"1"}}', '{"format":1,"tokens":{"a":true}}',
                '{"format":1}'):
        with pytest.raises(CoordinationError):
            fences.decode(bad, where="s")
