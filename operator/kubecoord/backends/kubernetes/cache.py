"""An informer's cache (client-go's thread-safe store with its indexer): the objects of
one list+watch as this process observed them, and the changes still to deliver.

Every write to the cache — from the reflector's list and watch events, and from this
process's own requests (offer, forget, absent) — goes through one lock and queues the
change it made; the informer takes the queue (take_pending) and delivers it in order.

Deletions leave tombstones: an object's response from an earlier GET or write (offer) is
never applied once this cache has seen the object deleted at a later version, nor when
the watch has already moved past that version without showing the object (it was
deleted, or left the selection, since).

Guarantees: a version of an object is applied (and queued as a change) at most once;
an object never goes back to an older version. Each cached object carries ``seen_at``:
the local monotonic time (the injected clock) when this process first observed that
version; expiry judgements (election, members) are made from it.

Final states: the last version of a deleted object is kept for its owner (``last_state``):
the DELETED event's object, exactly what the server had; for a deletion noticed by a
re-list, the cached version, marked with the annotation FINAL_STATE_UNKNOWN_ANNOTATION
(kubecoord.wire.object_names) because newer versions may have come and gone unseen.

Ordering of versions compares resourceVersions as integers when both are numeric (as
etcd's revisions are) and otherwise trusts arrival order.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecoord._internal.clock import Clock
from kubecoord.wire.object_names import FINAL_STATE_UNKNOWN_ANNOTATION

MAX_TOMBSTONES = 1024
LAST_STATES = 1024


@dataclass(frozen=True, slots=True)
class Observed:
    """One version of an object as this process observed it."""

    obj: dict[str, Any]
    version: str
    seen_at: float


Change = tuple[str, "Observed | None", "Observed | None"]
"""(object name, previous observation or None, new observation or None for deleted)."""
Subscriber = Callable[[list[Change]], None]


def _without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without metadata.managedFields (a shallow copy; the caller's dict is left as
    it is). Nothing here reads them, and they are often most of a small object's bytes:
    client-go's informers are commonly given the same transform (``SetTransform``)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return obj
    return {**obj, "metadata": {key: value for key, value in metadata.items() if key != "managedFields"}}


def labels_of(observed: Observed | None) -> set[tuple[str, str]]:
    if observed is None:
        return set()
    labels = (observed.obj.get("metadata") or {}).get("labels") or {}
    return {(str(key), str(value)) for key, value in labels.items()} if isinstance(labels, dict) else set()


def resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def object_name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def newer(candidate: str, than: str) -> bool:
    """Whether resourceVersion ``candidate`` is later than ``than`` (see module docstring)."""
    if not than:
        return True
    if candidate.isdigit() and than.isdigit():
        return int(candidate) > int(than)
    return candidate != than


class ObjectCache:
    """See the module docstring. ``lock`` also guards what the informer keeps in step
    with the queue of changes (its subscribers), so that a batch and its recipients are
    taken together."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.lock = threading.Lock()
        self._cache: dict[str, Observed] = {}
        self._tombstones: dict[str, str] = {}
        """name -> resourceVersion at (or after) which this cache saw it deleted."""
        self._final: dict[str, dict[str, Any]] = {}
        """name -> the object as last seen before it was deleted (the DELETED event's final
        state), for the newest LAST_STATES deleted names: what an owner re-creates it from."""
        self._pending: collections.deque[Change] = collections.deque()
        self._labelled: dict[tuple[str, str], set[str]] = {}
        """(label key, value) -> names of the cached objects carrying it."""
        self._last_rv = ""
        """The resourceVersion the watch has reached (the list's, then each event's)."""

    # -- reading ------------------------------------------------------------------------
    def get(self, name: str) -> Observed | None:
        with self.lock:
            return self._cache.get(name)

    def items(self) -> dict[str, Observed]:
        with self.lock:
            return dict(self._cache)

    def last_state(self, name: str) -> dict[str, Any] | None:
        """``name`` as cached, else as it was when this cache saw it deleted; None when
        never seen (or forgotten: only the newest LAST_STATES deletions are kept)."""
        with self.lock:
            cached = self._cache.get(name)
            return cached.obj if cached is not None else self._final.get(name)

    def labelled(self, key: str, value: str) -> dict[str, Observed]:
        """The cached objects whose label ``key`` is ``value`` (indexed: no scan)."""
        with self.lock:
            return {name: self._cache[name] for name in self._labelled.get((key, value), ())}

    def synced_to(self) -> str:
        """The resourceVersion a watch resumes from."""
        with self.lock:
            return self._last_rv

    def take_pending(self) -> list[Change]:
        """(Caller holds ``lock``.) The changes queued since the last call, oldest first."""
        batch = list(self._pending)
        self._pending.clear()
        return batch

    # -- from the reflector ----------------------------------------------------------------
    def replace(self, fresh: dict[str, dict[str, Any]], version: str) -> None:
        """A list at ``version``: queue the difference between the cache and ``fresh``."""
        with self.lock:
            for name in list(self._cache):
                previous = self._cache[name]
                # Absent from the list: deleted meanwhile — unless we hold it at a version
                # newer than the list (our own write after the list was served).
                if name not in fresh and not newer(previous.version, version):
                    self._remove(name, previous, version)
            for buried, at in list(self._tombstones.items()):
                if not newer(at, version):
                    del self._tombstones[buried]  # the list is newer than the deletion
            for name, obj in fresh.items():
                self._apply(name, obj, resource_version(obj))
            self._last_rv = version

    def watched(self, kind: object, obj: dict[str, Any], *, selected: bool) -> None:
        """A watch event of type ``kind``; ``selected``: the object is one this cache holds
        (the watch's version moves on either way)."""
        version = resource_version(obj)
        with self.lock:
            if kind in ("ADDED", "MODIFIED") and selected:
                self._apply(object_name(obj), obj, version)
            elif kind == "DELETED" and selected:
                self._apply(object_name(obj), None, version, final=obj)
            if version and newer(version, self._last_rv):
                self._last_rv = version

    # -- from this process's own requests ---------------------------------------------------
    def observation(self, obj: dict[str, Any]) -> Observed:
        """``obj`` as observed now, not stored: what a GET answered when the cache did not
        take it (offer() leaves out an uncached object the watch has moved past)."""
        return Observed(_without_managed_fields(obj), resource_version(obj), self._clock.now())

    def offer(self, obj: dict[str, Any]) -> Observed | None:
        """Apply an object returned by a write or a GET, unless the watch is already past
        it; the cached observation of that object afterwards."""
        name, version = object_name(obj), resource_version(obj)
        with self.lock:
            # Not cached and not newer than the watch: deleted (or gone from the selection)
            # since, and the watch already told us; _apply checks the tombstones.
            if name in self._cache or newer(version, self._last_rv):
                self._apply(name, obj, version)
            return self._cache.get(name)

    def forget(self, name: str) -> None:
        """Drop ``name`` after this process deleted it; older watch events do not bring it back."""
        with self.lock:
            previous = self._cache.get(name)
            if previous is not None:
                self._remove(name, previous, previous.version)

    def absent(self, name: str) -> None:
        """A GET found no ``name``: drop it unless the watch brought a newer version since."""
        with self.lock:
            previous = self._cache.get(name)
            if previous is not None and not newer(previous.version, self._last_rv):
                # The watch has not caught up with the deletion yet: the GET is fresher.
                self._remove(name, previous, previous.version)

    # -- applying changes (caller holds self.lock) ------------------------------------------
    def _remove(self, name: str, previous: Observed, buried_at: str) -> None:
        del self._cache[name]
        self._index(name, previous, None)
        self._remember(name, _unknown_final(previous.obj))
        self._bury(name, buried_at)
        self._pending.append((name, previous, None))

    def _apply(
        self, name: str, obj: dict[str, Any] | None, version: str, final: dict[str, Any] | None = None
    ) -> None:
        previous = self._cache.get(name)
        if obj is None:
            if previous is not None and (not version or newer(version, previous.version)):
                del self._cache[name]
                self._index(name, previous, None)
                self._remember(name, final or previous.obj)
                self._pending.append((name, previous, None))
            elif final is not None and previous is None:
                self._remember(name, final)
            self._bury(name, version or (previous.version if previous is not None else ""))
            return
        tombstone = self._tombstones.get(name)
        if tombstone is not None:
            if not newer(version, tombstone):
                return  # an older version of something deleted since: no resurrection
            del self._tombstones[name]
        if previous is not None and not newer(version, previous.version):
            return
        observed = Observed(_without_managed_fields(obj), version, self._clock.now())
        self._cache[name] = observed
        self._index(name, previous, observed)
        self._pending.append((name, previous, observed))

    def _remember(self, name: str, final: dict[str, Any]) -> None:
        """Keep ``final`` as ``name``'s last state (the newest LAST_STATES deletions)."""
        self._final.pop(name, None)
        self._final[name] = final
        while len(self._final) > LAST_STATES:
            del self._final[next(iter(self._final))]

    def _index(self, name: str, old: Observed | None, new: Observed | None) -> None:
        """Keep the label index in step with the cache."""
        before, after = labels_of(old), labels_of(new)
        for item in before - after:
            names = self._labelled.get(item)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._labelled[item]
        for item in after - before:
            self._labelled.setdefault(item, set()).add(name)

    def _bury(self, name: str, version: str) -> None:
        """Remember that ``name`` was deleted at ``version``."""
        if not version:
            return
        if newer(version, self._tombstones.get(name, "")):
            self._tombstones[name] = version
        if len(self._tombstones) > MAX_TOMBSTONES:
            # Tombstones the watch has moved past are redundant: offer() ignores uncached
            # objects not newer than the watch anyway.
            for buried, at in list(self._tombstones.items()):
                if not newer(at, self._last_rv):
                    del self._tombstones[buried]


def _unknown_final(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` marked as possibly not the last version before its deletion (a copy)."""
    metadata = dict(obj.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), FINAL_STATE_UNKNOWN_ANNOTATION: "true"}
    return {**obj, "metadata": metadata}
