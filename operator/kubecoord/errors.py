"""The one exception hierarchy of kubecoord.

Every error a backend can raise is translated into one of these; a backend's own
exceptions (kazoo's, the kubernetes client's) never reach the caller untranslated.
Callers branch on the class, never on the message.
"""

from __future__ import annotations


class CoordinationError(Exception):
    """Root of every error kubecoord raises."""


class InvalidArgumentError(CoordinationError, ValueError):
    """A key, value, id, name, URL or option is malformed; nothing was written."""


class ValueTooLargeError(InvalidArgumentError):
    """A value (or member/candidate data) exceeds what the backend can store."""


class KeyExistsError(CoordinationError):
    """put() of a key that is already present (put is create-only)."""


class KeyNotFoundError(CoordinationError, KeyError):
    """update() or delete() of a key that is absent."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain message
        return Exception.__str__(self)


class VersionConflictError(CoordinationError):
    """A write carried an expected_version that is no longer the key's version."""


class FencedError(CoordinationError):
    """A fenced write (``fence=Fence(name, token)``) was refused because the store had
    already accepted a higher token of the same fencing domain: a newer holder of that
    lock or election wrote first. Nothing was written. ``name`` is the fencing domain,
    ``token`` the refused token, ``accepted`` the higher token the store holds."""

    def __init__(self, message: str, *, name: str = "", token: int = 0, accepted: int = 0) -> None:
        super().__init__(message)
        self.name = name
        self.token = token
        self.accepted = accepted


class MemberExistsError(CoordinationError):
    """join() with the id of a live member (of this or another session)."""


class MemberNotFoundError(CoordinationError):
    """leave() of a member id this handle has not joined."""


class BackendUnavailableError(CoordinationError):
    """The backend cannot be reached (network, server down, session lost).

    Raised by a write as this class itself (not a subclass), the write was not applied:
    it was refused before it was sent, or the server answered that it did not apply it.
    A write whose outcome the client cannot know raises OutcomeUnknownError instead.
    """


class OutcomeUnknownError(BackendUnavailableError):
    """A write was sent but its answer was lost (connection reset, timeout, a server error
    that may follow a commit), and the backend could not find out whether it was applied:
    it may have been applied once, or not at all — never twice. Read the key (or the
    record) to learn which, and decide from what is there; blindly sending the same
    write again may apply a change the caller did not mean (a second update) or fail
    on the caller's own first write (KeyExistsError, VersionConflictError).

    A BackendUnavailableError, so handlers written for an unreachable backend keep working.
    """


class NamespaceNotFoundError(BackendUnavailableError):
    """The Kubernetes namespace of a kubernetes:// coordinator does not exist: raised by the
    first write (put, join, nominate), at once, instead of retrying something that cannot
    succeed until somebody creates the namespace."""


class PermissionDeniedError(CoordinationError):
    """The backend refused the call (HTTP 401/403, ZooKeeper NoAuth)."""


class StoreFullError(CoordinationError):
    """A write would exceed the store's configured or physical size limit."""


class UnsupportedFeatureError(CoordinationError):
    """A backend lacks a feature the caller asked for; names both."""

    def __init__(self, backend: str, feature: str) -> None:
        super().__init__(f"backend {backend!r} does not support {feature}")
        self.backend = backend
        self.feature = feature


class ClosedError(CoordinationError):
    """The coordinator or handle was closed; no further calls are accepted."""


class StaleGenerationError(CoordinationError):
    """Work was fenced: the generation is not this member's current one, or the member
    could not confirm its membership within its session timeout (group coordinator)."""


class RebalanceInProgressError(CoordinationError):
    """The group is rebalancing: an eager member holds no units until the new generation
    is assigned (group coordinator)."""


class GroupProtocolError(CoordinationError):
    """The group cannot agree on an assignment protocol, or a protocol returned an
    assignment that breaks the rules (unknown member, wrong type)."""


class LockHeldError(CoordinationError):
    """acquire() on a Lock (or Semaphore) object that already holds it: locks are not reentrant."""


class LockNotHeldError(CoordinationError):
    """release() on a Lock (or Semaphore) object that does not hold it (never acquired,
    released, or lost)."""
