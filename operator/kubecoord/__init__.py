"""kubecoord: leader election, group membership, a key-value store and change listeners
behind one interface (Kafka's KIP-30), with pluggable backends.

This module is the public surface: the interface, connect(), the value types and the
errors. Everything not re-exported here is internal and may change without notice.
"""

import logging

from kubecoord.api import (
    Coordinator,
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
from kubecoord.connect import BackendURL, connect, installed_backends
from kubecoord.errors import (
    BackendUnavailableError,
    ClosedError,
    CoordinationError,
    GroupProtocolError,
    InvalidArgumentError,
    KeyExistsError,
    KeyNotFoundError,
    LockHeldError,
    LockNotHeldError,
    MemberExistsError,
    MemberNotFoundError,
    NamespaceNotFoundError,
    PermissionDeniedError,
    RebalanceInProgressError,
    StaleGenerationError,
    StoreFullError,
    UnsupportedFeatureError,
    ValueTooLargeError,
    VersionConflictError,
)

# A library stays silent unless the application configures logging.
logging.getLogger("kubecoord").addHandler(logging.NullHandler())

__all__ = [
    "BackendURL",
    "BackendUnavailableError",
    "ClosedError",
    "CoordinationError",
    "Coordinator",
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
