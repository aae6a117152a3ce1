"""Protobuf request bodies, for the one kind client-go's leader election writes: Lease.

client-go's typed clients send built-in kinds as ``application/vnd.kubernetes.protobuf``
(the ``k8s\\x00`` magic, then a runtime.Unknown envelope holding the serialized object), and
read JSON answers fine. The real API server accepts them, so the emulator decodes them too,
or client-go's LeaseLock could never acquire here (found by running ``le-candidate``, a
client-go candidate, against both servers).

Decoded: coordination.k8s.io/v1 Lease — ObjectMeta (name, generateName, namespace, uid,
resourceVersion, generation, labels, annotations, ownerReferences, finalizers; timestamps
and managedFields are the server's to set and are dropped) and the whole LeaseSpec. Any
other kind stays 415, as before. Wire format: the field numbers of Kubernetes'
generated.proto files (k8s.io/api/coordination/v1, k8s.io/apimachinery/pkg/apis/meta/v1).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class Unsupported(ValueError):
    """Not a protobuf body the emulator decodes (another kind, or malformed)."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise Unsupported("truncated varint")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            value, i = buf[i:i + length], i + length
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise Unsupported(f"wire type {wire}")
        yield number, value


def _int(value: int | bytes) -> int:
    assert isinstance(value, int)
    return value - (1 << 64) if value >= 1 << 63 else value  # int32/int64 are two's complement


def _str(value: int | bytes) -> str:
    assert isinstance(value, bytes)
    return value.decode()


def _bytes(value: int | bytes) -> bytes:
    assert isinstance(value, bytes)
    return value


def _time(value: int | bytes, *, micro: bool) -> str:
    seconds = nanos = 0
    for number, field in _fields(_bytes(value)):
        if number == 1:
            seconds = _int(field)
        elif number == 2:
            nanos = _int(field)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    if micro:
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(value: int | bytes) -> tuple[str, str]:
    key = val = ""
    for number, field in _fields(_bytes(value)):
        if number == 1:
            key = _str(field)
        elif number == 2:
            val = _str(field)
    return key, val


def _owner(value: int | bytes) -> dict[str, Any]:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    flags = {6: "controller", 7: "blockOwnerDeletion"}
    owner: dict[str, Any] = {}
    for number, field in _fields(_bytes(value)):
        if number in names:
            owner[names[number]] = _str(field)
        elif number in flags:
            owner[flags[number]] = bool(field)
    return owner


def _metadata(value: int | bytes) -> dict[str, Any]:
    strings = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    metadata: dict[str, Any] = {}
    for number, field in _fields(_bytes(value)):
        if number in strings:
            if text := _str(field):
                metadata[strings[number]] = text
        elif number == 7:
            metadata["generation"] = _int(field)
        elif number in (11, 12):
            key, val = _entry(field)
            metadata.setdefault("labels" if number == 11 else "annotations", {})[key] = val
        elif number == 13:
            metadata.setdefault("ownerReferences", []).append(_owner(field))
        elif number == 14:
            metadata.setdefault("finalizers", []).append(_str(field))
    return metadata


def _lease_spec(value: int | bytes) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for number, field in _fields(_bytes(value)):
        if number == 1:
            spec["holderIdentity"] = _str(field)
        elif number == 2:
            spec["leaseDurationSeconds"] = _int(field)
        elif number in (3, 4):
            spec["acquireTime" if number == 3 else "renewTime"] = _time(field, micro=True)
        elif number == 5:
            spec["leaseTransitions"] = _int(field)
        elif number == 6:
            spec["strategy"] = _str(field)
        elif number == 7:
            spec["preferredHolder"] = _str(field)
    return spec


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded Lease; Unsupported for anything else."""
    if not raw.startswith(MAGIC):
        raise Unsupported("no k8s protobuf magic")
    api_version = kind = ""
    inner = b""
    for number, field in _fields(raw[len(MAGIC):]):
        if number == 1:
            for sub, value in _fields(_bytes(field)):
                if sub == 1:
                    api_version = _str(value)
                elif sub == 2:
                    kind = _str(value)
        elif number == 2:
            inner = _bytes(field)
    if (api_version, kind) != ("coordination.k8s.io/v1", "Lease"):
        raise Unsupported(f"{api_version} {kind}")
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {}}
    for number, field in _fields(inner):
        if number == 1:
            obj["metadata"] = _metadata(field)
        elif number == 2:
            obj["spec"] = _lease_spec(field)
    return obj
