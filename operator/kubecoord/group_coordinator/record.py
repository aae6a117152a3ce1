"""Writing the group's record, and checking and choosing the members' protocols.

The record's layout is a wire contract (kubecoord.wire.group_record); this module is how
the group coordinator's leader writes it.

Guarantees: two writers that read the same version cannot both write (the KV's
compare-and-set), so a generation is published once; the generation never decreases
(every writer derives the new record from the one it read).
"""

from __future__ import annotations

from kubecoord.api import Storage
from kubecoord.errors import GroupProtocolError, KeyExistsError, KeyNotFoundError, VersionConflictError
from kubecoord.wire.group_record import STATE_KEY, GroupState, Protocols, encode_state


def publish(store: Storage, state: GroupState, version: int | None) -> bool:
    """Write ``state`` over the record read at ``version`` (None: there was none) by
    compare-and-set; False when another writer came first (read again and re-decide)."""
    text = encode_state(state)
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
