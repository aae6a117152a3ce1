"""The storm's judge: every operator write in the API server's audit log, compared with who
held the operator Lease when the server received it.

Input: the audit log (JSON lines) of a kube-apiserver whose policy records the operator
Lease's writes at level RequestResponse (``lease_audit_rule``), its create included, so
each change of holder is in the log with the Lease as the server stored it, on the
server's clock — the clock of every other event. Only stage ``ResponseComplete`` is read.

- A *Lease state* is a 2xx write of the operator Lease: its holder and leaseTransitions
  (none after a delete), in force from the moment the server answered it
  (``stageTimestamp``). Every state with another holder than the one before is a
  *takeover* (a release to no holder is not). A 2xx write of the Lease logged without
  the Lease as stored is *unrecorded*: the log does not say who held it from then on.
- An *operator write* is a write request (create, update, patch, delete; dry runs left
  out: nothing is stored) whose user agent is ``kubecoord-operator/IDENTITY`` — what
  ``kubecoord operator --identity`` sends on its write path (kubecoord.operator.kubeapi).
  Reviews (``selfsubjectreviews`` and the like) store nothing and are left out too.
  Writes through kubecoord backend handles (the operator Lease's own election, an
  operator-led Group's coordinator record, member reaping) carry the client library's
  agent and no term: not judged here, counted (``unattributed``).
- A write is *in term* when the Lease's holder at its receipt is its identity, or a Lease
  write making its identity the holder was in progress then (the order is unknown).
  Otherwise it was sent by a *deposed* replica (or one that never held the Lease):
  refused (any answer outside 2xx) is what fencing must do; applied (2xx) is counted as
  ``window`` when it was received before the successor's first write and as a
  **violation** when received after it — the guarantee is that no write of a deposed
  replica reaching the API server after its successor's first write is applied
  (docs/operator.md, "High availability"); a write of a replica that never held the Lease
  is a violation at any time.
- A write received before the first Lease state, when that state is not the Lease's
  create (the log began later, or lacks the create), is *unattributable*: the log does
  not say who held the Lease then. The judge fails closed: unattributable writes and
  unrecorded Lease writes fail the verdict like violations, reported apart from them.
  Before a recorded create the Lease did not exist: no writer held it.
- With fencing, an in-term write must name the term it was sent in
  (``HOLDER/TRANSITIONS`` in the user extra ``kubecoord.dev/term``): one naming none, or
  another, is a ``term mismatch``.

Pure functions over parsed JSON: no server, no clock of its own.
"""

from __future__ import annotations

import bisect
import calendar
import json
import pathlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

AGENT_PREFIX = "kubecoord-operator/"
TERM_EXTRA = "kubecoord.dev/term"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def lease_audit_rule(namespace: str) -> dict[str, object]:
    """The audit policy rule that records the writes of the Leases in ``namespace`` (the
    operator Lease's among them) with their bodies
    (kubecoord_testkit.servers.kubernetes.RealApiServer's ``audit_rules``). Not by
    ``resourceNames``: the policy is matched on the request's URL, and a create's has no
    name, so such a rule logs the Lease's create — the first holder's term — at the
    default level, without the Lease."""
    return {"level": "RequestResponse", "verbs": list(WRITE_VERBS), "namespaces": [namespace],
            "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]}


def moment(stamp: str) -> float:
    """An audit timestamp (RFC 3339, UTC, microseconds) as unix seconds."""
    whole = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    fraction = stamp[19:].lstrip(".").rstrip("Z")
    return whole + (float(f"0.{fraction}") if fraction.isdigit() else 0.0)


@dataclass(frozen=True)
class LeaseState:
    received: float
    answered: float
    holder: str
    transitions: int
    created: bool = False
    """The Lease's create: there was no Lease before it."""

    @property
    def term(self) -> str:
        return f"{self.holder}/{self.transitions}" if self.holder else ""


@dataclass(frozen=True)
class Write:
    received: float
    identity: str
    verb: str
    resource: str
    namespace: str
    name: str
    code: int
    term: str
    """The term the write named (``kubecoord.dev/term``), "" when none."""

    @property
    def applied(self) -> bool:
        return 200 <= self.code < 300

    def describe(self, origin: float = 0.0) -> str:
        return (f"{self.received - origin:+.3f}s {self.identity} {self.verb} {self.resource} "
                f"{self.namespace}/{self.name} -> {self.code} term={self.term or '-'}")


@dataclass(frozen=True)
class AuditLog:
    states: list[LeaseState]
    writes: list[Write]
    unattributed: int
    """Writes by the operator's ServiceAccount without the operator's agent (backend handles)."""
    unrecorded_lease_writes: int = 0
    """2xx writes of the operator Lease logged without the Lease as stored."""


def read_audit(lines: Iterable[str], *, lease_namespace: str, lease: str, account: str) -> AuditLog:
    """The operator Lease's states and the operator writes in ``lines``; ``account`` is the
    operator's username (``system:serviceaccount:NS:SA``)."""
    states: list[LeaseState] = []
    writes: list[Write] = []
    unattributed = unrecorded = 0
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        if ref.get("resource") == "leases" and ref.get("namespace") == lease_namespace and ref.get("name") == lease:
            if not 200 <= code < 300:
                continue
            stored = event.get("responseObject")
            if not stored:
                unrecorded += 1
                continue
            spec = stored.get("spec") or {}
            holder = "" if event["verb"] in ("delete", "deletecollection") else str(spec.get("holderIdentity") or "")
            states.append(LeaseState(moment(event["requestReceivedTimestamp"]), moment(event["stageTimestamp"]),
                                     holder, int(spec.get("leaseTransitions") or 0), event["verb"] == "create"))
            continue
        write = operator_write(event)
        if write is not None:
            writes.append(write)
        elif not _stores_nothing(event) and (event.get("user") or {}).get("username") == account and \
                not str(event.get("userAgent") or "").startswith(AGENT_PREFIX):
            unattributed += 1
    states.sort(key=lambda s: s.answered)
    writes.sort(key=lambda w: w.received)
    return AuditLog(states, writes, unattributed, unrecorded)


def _stores_nothing(event: dict[str, Any]) -> bool:
    ref = event.get("objectRef") or {}
    return "dryRun=" in str(event.get("requestURI") or "") or str(ref.get("resource") or "").endswith("reviews")


def operator_write(event: dict[str, Any]) -> Write | None:
    """The operator write an audit event (stage ResponseComplete) records, or None: another
    identity's, a dry run, a review, a read, or not the operator's write path."""
    agent = str(event.get("userAgent") or "")
    if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS or \
            not agent.startswith(AGENT_PREFIX) or _stores_nothing(event):
        return None
    ref = event.get("objectRef") or {}
    extra = (event.get("impersonatedUser") or {}).get("extra") or {}
    resource = "/".join(part for part in (ref.get("resource"), ref.get("subresource")) if part)
    return Write(moment(event["requestReceivedTimestamp"]), agent[len(AGENT_PREFIX):], str(event["verb"]), resource,
                 str(ref.get("namespace") or ""), str(ref.get("name") or ""),
                 int((event.get("responseStatus") or {}).get("code") or 0), ",".join(extra.get(TERM_EXTRA) or []))


def read_audit_file(path: pathlib.Path, **where: str) -> AuditLog:
    with open(path, encoding="utf-8") as lines:
        return read_audit(lines, **where)


@dataclass
class Verdict:
    checked: int = 0
    """Operator writes judged."""
    in_term: int = 0
    takeovers: int = 0
    refused_late: list[Write] = field(default_factory=list)
    """Writes of a deposed replica answered outside 2xx: 403 is the term policy's refusal
    (fencing at work); 5xx or none, a request its resumed sender cancelled or abandoned."""
    window: list[Write] = field(default_factory=list)
    """Applied after the Lease moved on, received before the successor's first write."""
    violations: list[Write] = field(default_factory=list)
    term_mismatches: list[Write] = field(default_factory=list)
    unattributable: list[Write] = field(default_factory=list)
    """Received when the log does not say who held the Lease: before its first state, when
    that is not the Lease's create."""
    unattributed: int = 0
    unrecorded_lease_writes: int = 0
    origin: float = 0.0
    """The first Lease state's moment: what ``Write.describe`` counts from."""

    @property
    def ok(self) -> bool:
        return not (self.violations or self.term_mismatches or self.unattributable or self.unrecorded_lease_writes)


def judge(log: AuditLog, *, fenced: bool) -> Verdict:
    states = log.states
    verdict = Verdict(unattributed=log.unattributed, unrecorded_lease_writes=log.unrecorded_lease_writes,
                      origin=states[0].answered if states else 0.0)
    previous = ""
    for state in states:
        if state.holder and state.holder != previous:
            verdict.takeovers += 1
        if state.holder:
            previous = state.holder
    receipts: dict[str, list[float]] = {}
    for write in log.writes:
        receipts.setdefault(write.identity, []).append(write.received)
    for write in log.writes:
        verdict.checked += 1
        current = _state_at(states, write.received)
        becoming = _becoming(states, write)
        if current is None and not becoming and not (states and states[0].created):
            verdict.unattributable.append(write)
            continue
        if (current is not None and current.holder == write.identity) or becoming:
            verdict.in_term += 1
            if fenced and write.applied and current is not None and current.holder == write.identity \
                    and write.term != current.term:
                verdict.term_mismatches.append(write)
            continue
        if not write.applied:
            verdict.refused_late.append(write)
            continue
        successor = _successor_first_write(states, write, receipts)
        if successor is not None and write.received < successor:
            verdict.window.append(write)
        else:
            verdict.violations.append(write)
    return verdict


def _state_at(states: list[LeaseState], moment: float) -> LeaseState | None:
    """The Lease as the server had answered it last before ``moment``."""
    current = None
    for state in states:
        if state.answered > moment:
            break
        current = state
    return current


def _becoming(states: list[LeaseState], write: Write) -> bool:
    """A Lease write making ``write``'s identity the holder was in progress at its receipt."""
    return any(s.holder == write.identity and s.received <= write.received <= s.answered for s in states)


def _successor_first_write(states: list[LeaseState], write: Write, receipts: dict[str, list[float]]) -> float | None:
    """When a holder after ``write``'s identity's last term first wrote in its term (None:
    the identity never held the Lease before this write, or no later holder wrote);
    ``receipts``: each identity's writes, received in order."""
    held_until = None
    for index, state in enumerate(states):
        if state.answered > write.received:
            break
        if state.holder == write.identity:
            held_until = index
    if held_until is None:
        return None
    firsts = []
    for state in states[held_until + 1:]:
        if state.holder and state.holder != write.identity:
            # From the start of that term: the same identity's earlier terms (restarted) do not count.
            theirs = receipts.get(state.holder, [])
            index = bisect.bisect_left(theirs, state.received)
            if index < len(theirs):
                firsts.append(theirs[index])
    return min(firsts, default=None)
