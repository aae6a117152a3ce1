"""``kubecoord-testkit emulator``: run the Kubernetes API emulator in the foreground.

    kubecoord-testkit emulator --port 0 --kubeconfig /tmp/kubeconfig
    kubectl --kubeconfig /tmp/kubeconfig get namespaces

Prints the URL (and the kubeconfig path) once it is ready; stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from kubecoord_testkit.emulator.server import ApiEmulator


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on; 0 picks a free one (default)")
    parser.add_argument("--kubeconfig", help="write an admin kubeconfig for the emulator to this path")
    parser.add_argument("--namespace", default="default", help="the kubeconfig context's namespace")
    parser.add_argument(
        "--require-token",
        action="store_true",
        help="answer 401 to requests without a bearer token (by default they act as admin, because kubectl "
        "sends no token over plain HTTP)",
    )


def run(args: argparse.Namespace) -> int:
    done = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with ApiEmulator(host=args.host, port=args.port, anonymous_admin=not args.require_token) as api:
        print(api.url, flush=True)
        if args.kubeconfig:
            path = api.write_kubeconfig(args.kubeconfig, namespace=args.namespace)
            print(f"kubeconfig: {path}", flush=True)
        done.wait()
    return 0
