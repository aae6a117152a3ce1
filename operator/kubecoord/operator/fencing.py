"""Write fencing: the operator writes to the API only while this replica leads.

``kubecoord operator`` installs a check — the operator Lease handle's ``is_leader()``, the
holder's own view, which turns False as soon as its renew deadline passes without a
renewal, before any standby may acquire — and every write through
kubecoord.operator.kubeapi (status, backing objects, Roles, RoleBindings, the Lease
grants) asks it first; a refused write raises ``kubeapi.ApiException`` with reason
``NotLeading`` and is retried like any refused write, by which time the replica has
stopped. So two replicas never write status or grants at once as far as Lease timings
allow: a deposed leader stops writing at its renew deadline, a standby starts only after
the whole lease duration.

Not guaranteed: fencing of a request already sent when the deadline passes (its
duration is bounded by the request timeout, not by the Lease), nor of writes made
through a kubecoord backend handle (the group assignment's record, expired members'
reaping), which have their own compare-and-set protection.
Without an installed check (tests running kopf directly) every write is allowed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_lock = threading.Lock()
_check: Callable[[], bool] | None = None


def install(check: Callable[[], bool] | None) -> None:
    """Writes are allowed while ``check()`` is True (None: always)."""
    global _check
    with _lock:
        _check = check


def allowed() -> bool:
    check = _check
    return True if check is None else bool(check())
