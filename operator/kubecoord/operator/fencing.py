"""Write fencing: the operator writes to the API only while this replica leads, and no
write request outlives the term it was sent in.

``kubecoord operator`` installs a check — the operator Lease handle's ``is_leader()``, the
holder's own view, which turns False as soon as its renew deadline passes without a
renewal, before any standby may acquire — and every write through
kubecoord.operator.kubeapi (status, backing objects, Roles, RoleBindings, the Lease
grants, Events) asks it first; a refused write raises ``kubeapi.ApiException`` with
reason ``NotLeading`` and is retried like any refused write, by which time the replica
has stopped. So two replicas never write status or grants at once as far as Lease
timings allow: a deposed leader stops writing at its renew deadline, a standby starts
only after the whole lease duration.

Request timeouts (``write_timeout``): every write request is abandoned after at most
``lease_duration - renew_deadline`` seconds (and never more than half the renew deadline,
nor REQUEST_TIMEOUT): a write sent while ``is_leader()`` was True — at the latest at the renew
deadline — has been answered or abandoned by this process before the lease a standby
waits out has passed. A write that timed out is not re-sent by the transport (no
client-side retry); the work queue retries it, and that retry asks the check again, so
it is sent only within a term this replica still holds. With the default timings
(lease 15 s, renew deadline 10 s) a write may take 5 s. Reads keep REQUEST_TIMEOUT.

At the API server (``headers``, kubecoord.operator.term): with ``kubecoord operator
--fence-writes`` every write through kubecoord.operator.kubeapi carries this replica's
term, and the chart's admission policy refuses one that is not the operator Lease's
current term — so a request on the wire, or frozen with its process between the check
above and the send, is refused once a standby has taken over, instead of applied.

Not guaranteed without ``--fence-writes``: that the API server does not apply a request
this process abandoned or that was on the wire when the process froze (the server sees
no deadline). Never fenced at the server: writes made through a kubecoord backend handle
(the group assignment's record and election, expired members' reaping), which have
their own compare-and-set protection and whose request timeout the operator caps at
``write_timeout`` too (kubecoord.operator.connections).
Without an installed check (tests running kopf directly) every write is allowed, with
REQUEST_TIMEOUT and no term.

``set_before_send`` is a seam for tests only (kubecoord_testkit.operator_freeze freezes
the process there): a hook called after the check has allowed a write and before it is
sent. Nothing in the operator sets it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

REQUEST_TIMEOUT = 30.0
"""The longest any operator request may take (reads always; writes when no term is set)."""

_lock = threading.Lock()
_check: Callable[[], bool] | None = None
_write_timeout = REQUEST_TIMEOUT
_headers: dict[str, str] = {}
SendHook = Callable[[str, str], None]
"""``hook(method, path)``: what ``set_before_send`` installs."""
_before_send: SendHook | None = None


def install(check: Callable[[], bool] | None, *, lease_duration: float | None = None,
            renew_deadline: float | None = None, headers: dict[str, str] | None = None) -> None:
    """Writes are allowed while ``check()`` is True (None: always); with the operator Lease's
    timings, each write request is bounded so that it ends within the term (see above);
    ``headers`` go with every allowed write (the term, kubecoord.operator.term)."""
    global _check, _write_timeout, _headers
    timeout = REQUEST_TIMEOUT
    if lease_duration is not None and renew_deadline is not None:
        timeout = term_write_timeout(lease_duration, renew_deadline)
    with _lock:
        _check = check
        _write_timeout = timeout
        _headers = dict(headers or {})


def term_write_timeout(lease_duration: float, renew_deadline: float) -> float:
    """The write timeout for these operator Lease timings (client-go's rule holds:
    lease_duration > renew_deadline > 0, so the result is positive)."""
    if not 0 < renew_deadline < lease_duration:
        raise ValueError(f"renew deadline {renew_deadline} must be positive and below lease duration {lease_duration}")
    return min(REQUEST_TIMEOUT, renew_deadline / 2, lease_duration - renew_deadline)


def allowed() -> bool:
    check = _check
    return True if check is None else bool(check())


def admit(method: str, path: str) -> dict[str, str] | None:
    """The headers a write of ``method path`` is sent with, or None when it may not be sent
    (this replica does not lead). The last step before the send."""
    with _lock:
        check, headers, hook = _check, _headers, _before_send
    if check is not None and not check():
        return None
    if hook is not None:
        hook(method, path)
    return dict(headers)


def set_before_send(hook: SendHook | None) -> None:
    """Tests only: ``hook(method, path)`` runs between the check and the send of every
    allowed write (None removes it)."""
    global _before_send
    with _lock:
        _before_send = hook


def write_timeout() -> float:
    """Seconds a write request may take before it is abandoned."""
    return _write_timeout
