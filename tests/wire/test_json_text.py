"""Reading JSON from the wire (kubecoord.wire.json_text): text nested deeper than Python's
parser recurses is a ValueError like any other unreadable text, so each stored-data reader
answers it as it answers text that is not JSON (never RecursionError)."""

from __future__ import annotations

import json

import pytest

from kubecoord.errors import CoordinationError, GroupProtocolError
from kubecoord.wire import api_status, fences, group_record, json_text, kv_entries

DEEP = 100_000
NESTED = ["[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP]


@pytest.mark.parametrize("text", NESTED, ids=["list", "object"])
def test_nesting_too_deep_to_read_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="nests too deep"):
        json_text.loads(text)
    with pytest.raises(ValueError, match="nests too deep"):
        json_text.loads_object(text.encode())


@pytest.mark.parametrize("text", ["[]", "1", '"x"', "null"])
def test_a_value_that_is_no_object_is_refused_where_an_object_is_read(text: str) -> None:
    assert json_text.loads(text) == json.loads(text)
    with pytest.raises(ValueError, match="not an object"):
        json_text.loads_object(text)


@pytest.mark.parametrize("text", NESTED, ids=["list", "object"])
def test_the_stored_data_readers_answer_deep_nesting_as_unreadable(text: str) -> None:
    assert kv_entries.load_entry("k", text) is None
    assert group_record.decode_join_data(text) is None
    with pytest.raises(GroupProtocolError):
        group_record.decode_state(text)
    with pytest.raises(CoordinationError, match="not JSON"):
        fences.decode(text, where="store s")
    assert api_status.status_message(text) == text[:200]
