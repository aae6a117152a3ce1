"""kubecoord: leader election, group membership, a key-value store and change listeners
behind one interface (Kafka's KIP-30), with pluggable backends.

This module is the public surface: the interface, connect(), the value types and the
errors. Everything not re-exported here is internal and may change without notice.
"""

from typing import TYPE_CHECKING, Any

# Eager (cheap): the function ``connect`` must shadow the submodule of the same name,
# which a lazy import would leave bound to ``kubecoord.connect``.
from kubecoord.connect import BackendURL, connect, installed_backends
from kubecoord.errors import (
    BackendUnavailableError,
    ClosedError,
    CoordinationError,
    FencedError,
    GroupProtocolError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    LockHeldError,
    LockNotHeldError,
    MemberExistsError,
    MemberNotFoundError,
    NamespaceNotFoundError,
    OutcomeUnknownError,
    PermissionDeniedError,
    RebalanceInProgressError,
    StaleGenerationError,
    StoreFullError,
    UnsupportedFeatureError,
    ValueTooLargeError,
    VersionConflictError,
)

__version__ = "0.1.0"
"""The distribution's version, as pyproject.toml says (tests/packaging/test_version.py checks
they agree): ``kubecoord --version`` prints it without asking importlib.metadata."""

if TYPE_CHECKING:  # for type checkers and the API reference; at run time see __getattr__
    from kubecoord.api import (
        Coordinator,
        Fence,
        GroupCoordinatorHandle,
        GroupDescription,
        GroupMembership,
        GroupProtocol,
        KeySetListener,
        Leader,
        LeaderElection,
        LeaderListener,
        LeadingCallback,
        ListenerRegistry,
        Lock,
        LockHolder,
        MembershipListener,
        RebalanceProtocol,
        Semaphore,
        Storage,
        ValueListener,
        Versioned,
    )

_LAZY = dict.fromkeys(
    ["Coordinator", "Fence", "GroupCoordinatorHandle", "GroupDescription", "GroupMembership", "GroupProtocol",
     "KeySetListener", "Leader", "LeaderElection", "LeaderListener", "LeadingCallback", "ListenerRegistry",
     "Lock", "LockHolder", "MembershipListener", "RebalanceProtocol", "Semaphore", "Storage",
     "ValueListener", "Versioned"],
    "kubecoord.api",
)
"""Public names imported on first use (PEP 562): ``import kubecoord.cli`` or
``kubecoord.wire`` must not pay for the interface's imports (~0.1 s of the command line's
start-up); ``kubecoord.connect(...)`` and ``from kubecoord import Storage`` work as before."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kubecoord' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


# A library stays silent unless the application configures logging: connect() gives the
# "kubecoord" logger its NullHandler (connect.py), not this import, which ``kubecoord
# --help`` pays for (``logging`` imports ``traceback``, ``threading``, ``string``...).

__all__ = [
    "BackendURL",
    "BackendUnavailableError",
    "ClosedError",
    "CoordinationError",
    "Coordinator",
    "Fence",
    "FencedError",
    "GroupCoordinatorHandle",
    "GroupDescription",
    "GroupMembership",
    "GroupProtocol",
    "GroupProtocolError",
    "InvalidArgumentError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeySetListener",
    "Leader",
    "LeaderElection",
    "LeaderListener",
    "LeadingCallback",
    "ListenerRegistry",
    "Lock",
    "LockHeldError",
    "LockHolder",
    "LockNotHeldError",
    "MemberExistsError",
    "MemberNotFoundError",
    "MembershipListener",
    "NamespaceNotFoundError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "RebalanceInProgressError",
    "RebalanceProtocol",
    "Semaphore",
    "StaleGenerationError",
    "Storage",
    "StoreFullError",
    "UnsupportedFeatureError",
    "ValueListener",
    "ValueTooLargeError",
    "VersionConflictError",
    "Versioned",
    "connect",
    "installed_backends",
]
