"""Writing the group's record, and checking and choosing the members' protocols.

The record's layout is a wire contract (kubecoord.wire.group_record); this module is how
the group coordinator's leader writes it.

Guarantees: two writers that read the same version cannot both write (the KV's
compare-and-set), so a generation is published once; the generation never decreases
(every writer derives the new record from the one it read).

Limits: the record is one value, so it must fit the store's ``max_value_bytes`` (256 KiB
by default on the Kubernetes backend); publish() raises ValueTooLargeError naming that
limit, before any request, when it does not. Its size is the sum of the members'
metadata (base64, once per protocol a member offers) and assignments; UnitsProtocol
keeps both small for large unit lists (index runs, see units.py): 811 bytes for 4,096
units of 100 characters and 3 members, where names took 1,125,567. A member's join data
is capped at 64 KiB by the membership (validation.MAX_DATA_BYTES). One value rather
than a head and chunks keeps the single compare-and-set that makes a generation
atomic: no reader can see half of one.
"""

from __future__ import annotations

from kubecoord.api import Storage
from kubecoord.errors import (
    GroupProtocolError,
    KeyExistsError,
    KeyNotFoundError,
    ValueTooLargeError,
    VersionConflictError,
)
from kubecoord.wire.group_record import STATE_KEY, GroupState, Protocols, encode_state


def publish(store: Storage, state: GroupState, version: int | None) -> bool:
    """Write ``state`` over the record read at ``version`` (None: there was none) by
    compare-and-set; False when another writer came first (read again and re-decide).
    ValueTooLargeError, before any request, when the record passes the store's value limit."""
    text = encode_state(state)
    size = len(text.encode("utf-8"))
    if size > store.max_value_bytes:
        raise ValueTooLargeError(
            f"group record of generation {state.generation} is {size} bytes, over the {store.max_value_bytes} bytes "
            f"a value of store {store.name!r} may hold: the members' metadata or assignments are too large"
        )
    try:
        if version is None:
            store.put(STATE_KEY, text)
        else:
            store.update(STATE_KEY, text, expected_version=version)
    except (VersionConflictError, KeyExistsError, KeyNotFoundError):
        return False
    return True


def check_protocols(protocols: object) -> Protocols:
    """A protocol's metadata() result, checked (GroupProtocolError when malformed)."""
    if not isinstance(protocols, list | tuple) or not protocols:
        raise GroupProtocolError("metadata() must return a non-empty list of (protocol name, metadata bytes)")
    checked: list[tuple[str, bytes]] = []
    for item in protocols:
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str) and item[0]):
            raise GroupProtocolError(f"metadata() entries must be (name, bytes) pairs, got {item!r}")
        if not isinstance(item[1], bytes | bytearray):
            raise GroupProtocolError(f"metadata of protocol {item[0]!r} must be bytes")
        checked.append((item[0], bytes(item[1])))
    return tuple(checked)


def select_protocol(members: dict[str, Protocols]) -> str:
    """The protocol every member supports that most members prefer (Kafka's vote).

    Each member votes for the first protocol in its own order that all members support;
    ties go to the protocol the lowest member id prefers first.
    """
    names = [[name for name, _ in protos] for _, protos in sorted(members.items())]
    common = set(names[0]).intersection(*names[1:]) if names else set()
    if not common:
        supported = dict(zip(sorted(members), names, strict=True))
        raise GroupProtocolError(f"no protocol is supported by every member: {supported}")
    votes: dict[str, int] = {}
    for order in names:
        choice = next(name for name in order if name in common)
        votes[choice] = votes.get(choice, 0) + 1
    best = max(votes.values())
    return next(name for order in names for name in order if votes.get(name) == best)
