"""Quantities as the CRDs admit them for ``sizeLimit``: a whole number with an optional
binary suffix (512Ki, 1Mi, 2Gi); and bytes printed as kubectl prints quantities."""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^([1-9][0-9]*)(Ki|Mi|Gi)?$")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def parse_quantity(text: object) -> int | None:
    """Bytes of a quantity like 512Ki or 1Mi; None if ``text`` is not one."""
    match = _QUANTITY.match(str(text))
    return int(match.group(1)) * _UNITS[match.group(2)] if match else None


def human_bytes(count: int) -> str:
    """Bytes in the units kubectl shows for quantities: 0, 512, 1.5Ki, 12.0Mi."""
    if count < 1024:
        return str(count)
    for unit, factor in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if count >= factor:
            return f"{count / factor:.1f}{unit}"
    return str(count)  # pragma: no cover - unreachable
