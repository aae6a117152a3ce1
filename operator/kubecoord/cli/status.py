"""``kubecoord status``: every LeaderElection, Group and KVStore of a namespace at a glance.

Reads the kubecoord.dev custom resources (the operator keeps their status: leader and
epoch, members and generation, keys and size) and judges each one's health:

- ``Ready``: the operator's Ready condition is True and it has seen the latest spec;
- ``NotReady: REASON``: the condition is False (the reason and message say why);
- ``Pending``: the operator has not yet seen the latest spec (observedGeneration behind);
- ``Unknown``: no status at all (is the operator running?).

The resources live in Kubernetes whatever backend their spec picks, so the URL must be
kubernetes://NAMESPACE; ``-A`` lists every namespace.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from kubecoord.cli.connection import add_connection_arguments, open_api, resolve_url
from kubecoord.cli.exits import UsageError
from kubecoord.cli.output import add_output_argument, print_table, show
from kubecoord.cli.resources import ResourceReader
from kubecoord.wire.crd import GROUP, KINDS

HEADERS = ["KIND", "NAME", "BACKEND", "LEADER", "EPOCH", "MEMBERS", "KEYS", "HEALTH", "AGE"]
WIDE = ["GENERATION", "SIZE", "OBSERVED"]
"""-o wide's columns after HEALTH: a Group's generation, a KVStore's bytes, and the
resource generation the operator last acted on (observedGeneration/metadata.generation)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (adds a column)")
    parser.add_argument("--kind", choices=list(KINDS.values()), help="only the resources of this kind")
    add_output_argument(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    url = resolve_url(args)
    if url.scheme != "kubernetes":
        raise UsageError(
            "status lists the kubecoord.dev custom resources, which live in Kubernetes whatever backend they "
            f"use: give --url kubernetes://NAMESPACE, not {url.scheme}://"
        )
    with open_api(args, url) as api:
        reader = ResourceReader(api)
        now = dt.datetime.now(dt.UTC)
        entries = [
            describe(KINDS[plural], item, now)
            for plural in KINDS
            if args.kind in (None, KINDS[plural])
            for item in reader.list(plural, all_namespaces=args.all_namespaces)
        ]
    document = {"namespace": None if args.all_namespaces else reader.namespace, "resources": entries}
    if args.output not in ("table", "wide"):
        names = [f"{e['kind'].lower()}.{GROUP}/{e['name']}" for e in entries]  # as kubectl get -o name
        show(args.output, document, ([], []), names=names)
        return 0
    if not entries:
        where = "any namespace" if args.all_namespaces else f"namespace {reader.namespace!r}"
        print(f"no {args.kind or 'LeaderElection, Group or KVStore'} in {where}")
        return 0
    wide = args.output == "wide"
    headers = (["NAMESPACE"] if args.all_namespaces else []) + HEADERS
    if wide:
        headers = headers[:-1] + WIDE + headers[-1:]
    rows = [
        ([entry["namespace"]] if args.all_namespaces else [])
        + [
            entry["kind"],
            entry["name"],
            entry["backend"],
            entry["leader"] or "-",
            _dash(entry["epoch"]),
            _dash(entry["members"]),
            _dash(entry["keys"]),
            entry["health"],
            *([_dash(entry["generation"]), _dash(entry["size"]), entry["observed"]] if wide else []),
            entry["age"],
        ]
        for entry in entries
    ]
    print_table(headers, rows, wide=wide)
    return 0


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def describe(kind: str, item: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    metadata = item.get("metadata") or {}
    spec = item.get("spec") or {}
    status = item.get("status") or {}
    entry: dict[str, Any] = {
        "kind": kind,
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "backend": spec.get("backend", "kubernetes"),
        "leader": status.get("leader") if kind == "LeaderElection" else None,
        "epoch": status.get("epoch") if kind == "LeaderElection" else None,
        "members": status.get("memberCount") if kind == "Group" else None,
        "generation": status.get("generation") if kind == "Group" else None,
        "keys": status.get("keys") if kind == "KVStore" else None,
        "size": status.get("size") if kind == "KVStore" else None,
        "age": _age(metadata.get("creationTimestamp"), now),
        "observed": f"{_dash(status.get('observedGeneration'))}/{_dash(metadata.get('generation'))}",
        "status": status,
    }
    entry["health"], entry["healthy"] = health(metadata, status)
    return entry


def health(metadata: dict[str, Any], status: dict[str, Any]) -> tuple[str, bool]:
    if not status:
        return "Unknown", False
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None:
        return "Unknown", False
    if ready.get("status") != "True":
        reason = ready.get("reason") or "NotReady"
        message = ready.get("message")
        return f"NotReady: {reason}" + (f" ({message})" if message else ""), False
    observed = status.get("observedGeneration")
    if observed is not None and metadata.get("generation") is not None and observed < metadata["generation"]:
        return "Pending", False
    return "Ready", True


def _age(created: str | None, now: dt.datetime) -> str:
    """kubectl's short form: 45s, 12m, 5h, 3d."""
    if not created:
        return "-"
    try:
        seconds = (now - dt.datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size if unit != "m" else seconds >= 120:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"
