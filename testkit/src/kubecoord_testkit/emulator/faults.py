"""Injected request failures: "the next N requests like this one fail with code C".

A test control (``ApiEmulator.fail``) for what a real cluster does now and then and a
test cannot provoke on demand: 422 from a webhook, 413 for a body too large, 429 from API
priority and fairness, 5xx from an overloaded or restarting server. A matching request is
answered with the API server's Status for that code and is not processed (nothing is
written). Faults match by verb (get, list, create, update, patch, delete, ...), resource
plural and subresource, are used in the order they were added, and each answers ``times``
requests before it is spent.

A fault may instead cut the answer (``cut=True``): the request IS processed (a write is
applied) and its answer's headers are sent, but the connection closes half-way through the
body — a network that broke at the worst moment. The client cannot tell whether a write
happened; it must report the outcome as unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubecoord_testkit.emulator.requestinfo import RequestInfo
from kubecoord_testkit.emulator.status import StatusError

REASONS = {
    413: ("RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    422: ("Invalid", "the request was refused by an admission webhook (injected fault)"),
    429: ("TooManyRequests", "too many requests, please try again later"),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


@dataclass
class Fault:
    verb: str
    resource: str
    subresource: str | None
    code: int
    times: int
    cut: bool = False

    def matches(self, info: RequestInfo) -> bool:
        return (self.times > 0 and info.verb == self.verb and info.plural == self.resource
                and (info.subresource or None) == self.subresource)

    def error(self) -> StatusError:
        reason, message = REASONS.get(self.code, ("InternalError", f"injected fault {self.code}"))
        return StatusError(self.code, reason, message)


class Faults:
    """The pending faults of one emulator (used on its event loop only)."""

    def __init__(self) -> None:
        self._pending: list[Fault] = []

    def add(self, fault: Fault) -> None:
        self._pending.append(fault)

    def clear(self) -> None:
        self._pending.clear()

    def remaining(self) -> int:
        return sum(fault.times for fault in self._pending)

    def check(self, info: RequestInfo) -> bool:
        """Raise the fault's StatusError when one matches ``info`` (and count it spent);
        True when the matching fault cuts the answer instead (the request is processed)."""
        for fault in self._pending:
            if fault.matches(info):
                fault.times -= 1
                if fault.times == 0:
                    self._pending.remove(fault)
                if fault.cut:
                    return True
                raise fault.error()
        return False
