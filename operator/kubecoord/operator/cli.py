"""``kubecoord operator``: the operator process (what the Helm chart's Deployment runs).

    kubecoord operator [--namespace NS ... | --all-namespaces] [--history PATH]

Environment (what the Helm chart sets): POD_NAME and POD_NAMESPACE (downward API) name
this replica and the namespace of its operator Lease; KUBECOORD_OPERATOR_LEASE names that
Lease (default kubecoord-operator); KUBECOORD_HEALTH_PORT, KUBECOORD_METRICS_PORT and
KUBECOORD_LOG_LEVEL are the defaults of the matching flags; KUBECONFIG is used outside a
cluster. Serves /healthz and /readyz on the health port (8080; kubecoord.operator.health)
and Prometheus metrics on the metrics port (9090, 0 disables; without the ``_created``
series prometheus_client would add to every counter and histogram). kopf is imported only
once this replica leads (kubecoord.operator.ha).

At the default log level (no --log-level, no KUBECOORD_LOG_LEVEL) the operator logs its
life, not its traffic: one line at start (version, watched namespaces, backend and
operator Lease, HA role), one when it stands by and one when it leads, access problems
when they appear and clear (kubecoord.operator.access), and every warning and error.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from typing import Any

from kubecoord.timings import DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD

ELECTION = "kubecoord-operator"
LIFECYCLE_LOGGERS = ("kubecoord.operator.lifecycle", "kubecoord.operator.ha", "kubecoord.operator.access")
"""Loggers whose INFO lines (start, standing by, leading, access) show at the default level."""

log = logging.getLogger("kubecoord.operator.lifecycle")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", action="append", default=[], help="watch this namespace (repeatable)")
    scope.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument("--history", default=None, help="append the operator's coordination event log here (JSONL)")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig outside a cluster (default: $KUBECONFIG)")
    parser.add_argument("--identity", default=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
                        help="this replica's candidate id in the operator election (default: $POD_NAME, else HOST-PID)")
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="namespace of the kubecoord-operator Lease (default: $POD_NAMESPACE, else the kubeconfig's)",
    )
    parser.add_argument(
        "--lease-name",
        default=os.environ.get("KUBECOORD_OPERATOR_LEASE", ELECTION),
        help="name of the operator's own LeaderElection Lease (default: %(default)s)",
    )
    for flag, default, what in (("--lease-duration", DEFAULT_LEASE_DURATION, "Lease duration"),
                                ("--renew-deadline", DEFAULT_RENEW_DEADLINE, "renew deadline"),
                                ("--retry-period", DEFAULT_RETRY_PERIOD, "retry period")):
        parser.add_argument(flag, type=float, default=default, help=f"operator {what} (s)")
    parser.add_argument(
        "--health-port", type=int, default=int(os.environ.get("KUBECOORD_HEALTH_PORT", 8080)), help="/healthz port"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(os.environ.get("KUBECOORD_METRICS_PORT", 9090)),
        help="/metrics port (0: disabled)",
    )
    parser.add_argument("--resync-seconds", type=float, default=60.0,
                        help="how often every resource's backing objects and grants are compared with its spec; "
                             "a stale grant is removed within this period (default: %(default)s)")
    parser.add_argument("--confinement-policy",
                        default="kubecoord-lease-grants",
                        help="the ValidatingAdmissionPolicy that confines Group clients; their Lease writes are "
                             "granted only while it is in force (default: %(default)s)")
    parser.add_argument("--confinement-binding", default=None,
                        help="the binding of that policy that must exist too (default: named as the policy; the "
                             "chart's is RELEASE-kubecoord-lease-grants)")
    parser.add_argument("--allow-unconfined-group-clients", action="store_true",
                        help="grant Group clients namespace-wide Lease writes even without the confinement policy "
                             "(they may then write every Lease of their namespace)")
    parser.add_argument("--fence-writes", action="store_true",
                        help="every write names this replica's term (the operator Lease's holder and transitions) "
                             "and the chart's term policy refuses a stale one at the API server; needs a "
                             "ServiceAccount identity and --lease-namespace (or $POD_NAMESPACE)")
    parser.add_argument("--bind", default="0.0.0.0", help="address of the health and metrics endpoints")
    parser.add_argument("--access-check-seconds", type=float, default=10.0,
                        help="how often the reads the operator needs are asked of the API server (its writes, by "
                             "access review, every 6th time); a refusal or an unreachable server makes /readyz answer "
                             "503 (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from prometheus_client import disable_created_metrics, start_http_server

    import kubecoord
    from kubecoord.operator import access, confinement, health, kubeapi
    from kubecoord.operator.controller.reconciler import controller
    from kubecoord.operator.ha import Scope, run_when_leading
    from kubecoord.operator.kinds.history import History

    if os.environ.get("KUBECOORD_LOG_LEVEL"):
        logging.getLogger().setLevel(os.environ["KUBECOORD_LOG_LEVEL"].upper())
    elif getattr(args, "log_level", None) is None:
        for name in LIFECYCLE_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO)
    if args.access_check_seconds <= 0:
        raise SystemExit("--access-check-seconds must be positive")
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # read by kopf's login and by kubeapi
    History.target = args.history
    if args.resync_seconds <= 0:
        raise SystemExit("--resync-seconds must be positive")
    if args.fence_writes and not args.lease_namespace:
        raise SystemExit("--fence-writes needs --lease-namespace (or $POD_NAMESPACE)")
    controller.resync_seconds = args.resync_seconds
    confinement.configure(policy=args.confinement_policy, binding=args.confinement_binding,
                          allow_unconfined=args.allow_unconfined_group_clients)
    kubeapi.USER_AGENT = f"kubecoord-operator/{args.identity}"
    state = health.HealthState()
    server = health.serve(state, args.bind, args.health_port)
    if args.metrics_port:
        # A _created series per counter and histogram: nothing a dashboard or alert reads.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        start_http_server(args.metrics_port, addr=args.bind)
    options: dict[str, Any] = {
        "lease_duration": args.lease_duration,
        "renew_deadline": args.renew_deadline,
        "retry_period": args.retry_period,
    }
    if os.environ.get("KUBECONFIG"):
        options["kubeconfig"] = os.environ["KUBECONFIG"]
    scope = Scope(namespaces=tuple(args.namespace), clusterwide=args.all_namespaces or not args.namespace)
    log.info(
        "kubecoord operator %s starting: watching %s; backend kubernetes://%s, operator Lease %s; identity %s, "
        "standing by until it holds that Lease (one replica reconciles)", kubecoord.__version__,
        "every namespace" if scope.clusterwide else "namespaces " + ", ".join(scope.namespaces),
        args.lease_namespace or "(the kubeconfig's namespace)", args.lease_name, args.identity,
        extra={"version": kubecoord.__version__, "namespaces": list(scope.namespaces) or "*",
               "lease": f"{args.lease_namespace}/{args.lease_name}", "identity": args.identity, "role": "standby"},
    )
    monitor = access.AccessMonitor(state, access.probes(scope.namespaces, scope.clusterwide),
                                   access.writes(scope.namespaces, scope.clusterwide),
                                   interval=args.access_check_seconds).start()
    try:
        with kubecoord.connect(f"kubernetes://{args.lease_namespace}", **options) as coordinator:
            return run_when_leading(coordinator, args.identity, scope, state, election=args.lease_name,
                                    lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                    fence=args.lease_namespace if args.fence_writes else None)
    finally:
        monitor.stop()
        History.close()
        server.shutdown()
