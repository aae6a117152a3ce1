"""JSON text read from the wire: every way a text fails to be read is ValueError.

Python's ``json.loads`` raises ValueError (JSONDecodeError) for text that is not JSON,
but RecursionError for JSON nested deeper than its parser recurses (``[`` a few thousand
times: a body no API server sends, and one any proxy, hand edit or peer may) — an
exception no caller that reads what another process wrote expects. ``loads`` is the one
reading of such text: a value, or ValueError. ``loads_object`` also refuses a value that is
not an object where every reader wants one (an API answer, a watch event, a stored record).
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes | bytearray) -> Any:
    """The JSON value of ``text``; ValueError when it is not JSON or nests too deep to read."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON nests too deep to read") from None


def loads_object(text: str | bytes | bytearray) -> dict[str, Any]:
    """The JSON object of ``text``; ValueError as ``loads``, or when the value is not an object."""
    value = loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"the JSON is {type(value).__name__}, not an object")
    return value
