"""``kubecoord-testkit demo`` (and ``make demo``): the embedded end-to-end demo, or a short
scenario on the memory backend.

``kubecoord-testkit demo`` runs demos.operator_scenario: the Kubernetes API emulator (or the
cluster of $KUBECONFIG), the operator, the examples/ resources, three candidate
processes and two group members, a leader killed with -9 and the failover, a member
leaving, a KV update with listeners, and ``kubectl get`` tables along the way (~30 s).

``kubecoord-testkit demo --url memory://demo`` runs demos.memory_scenario instead (~1 s).
"""

from __future__ import annotations

import argparse

from kubecoord_testkit.demos.memory_scenario import scenario


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help="run the in-process scenario on this URL (e.g. memory://demo)")
    parser.add_argument(
        "--namespace", default="default", help="namespace of the end-to-end demo (default: %(default)s)"
    )
    parser.add_argument(
        "--external-operator",
        action="store_true",
        help="do not start an operator (one already runs on the $KUBECONFIG cluster, e.g. from the Helm chart)",
    )


def run(args: argparse.Namespace) -> int:
    if args.url:
        return scenario(args.url)
    from kubecoord_testkit.demos.operator_scenario import run_demo  # needs the operator extra (kopf, kubernetes)

    return run_demo(namespace=args.namespace, external_operator=args.external_operator)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    return run(parser.parse_args())
