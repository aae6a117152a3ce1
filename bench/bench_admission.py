"""Cost of CRD admission in the API emulator (kubecoord_testkit.emulator.admission).

Prints, for the project's LeaderElection CRD, microseconds per admit() of: creates of
distinct objects, spec updates (transition rules run), refused creates (422 built), and
status writes (the spec's rule results are reused from the verdict cache), next to a peer
in the same process: jsonschema's Draft4Validator checking the same openAPIV3Schema
(structure only: no pruning, defaulting or CEL). Wall-clock figures vary with the
machine's load; the ratio to the peer is the steadier figure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kubecoord_testkit.emulator.admission import Invalid, admit

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 300


def per_call_us(fn: Callable[[int], object]) -> float:
    fn(-1)  # warm the compiled programs and patterns
    start = time.perf_counter()
    for i in range(ROUNDS):
        fn(i)
    return (time.perf_counter() - start) / ROUNDS * 1e6


def resource(i: int) -> dict[str, Any]:
    """A distinct LeaderElection per i (name and lease duration): the rules reading them
    are evaluated afresh, the others' results are reused."""
    return {
        "apiVersion": "kubecoord.dev/v1alpha1",
        "kind": "LeaderElection",
        "metadata": {"name": f"billing-{i + 1}", "namespace": "default"},
        "spec": {"leaseDurationSeconds": 15 + i % 3000, "renewDeadlineSeconds": 10, "clients": ["billing", "reports"]},
    }


def main() -> None:
    crd = yaml.safe_load((ROOT / "crds/leaderelections.kubecoord.dev.yaml").read_text())
    validator = jsonschema.Draft4Validator(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    stored = admit(crd, resource(0), None, None)
    stored["status"] = {"leader": "pod-a", "epoch": 1}

    def status_write(i: int) -> object:
        return admit(crd, {**stored, "status": {"leader": f"pod-{i}", "epoch": i + 2}}, stored, "status")

    def spec_update(i: int) -> object:
        return admit(crd, {**stored, "spec": {**stored["spec"], "leaseDurationSeconds": 20 + i % 3000}}, stored, None)

    def refused(i: int) -> None:
        broken = resource(i)
        broken["spec"]["renewDeadlineSeconds"] = broken["spec"]["leaseDurationSeconds"] + 1
        try:
            admit(crd, broken, None, None)
        except Invalid:
            return
        raise AssertionError("the invalid object was admitted")

    peer = per_call_us(lambda i: validator.is_valid(resource(i)))
    figures = {
        "create, distinct name and lease duration each time": per_call_us(
            lambda i: admit(crd, resource(i), None, None)
        ),
        "spec update of the lease duration (rules reading it re-run)": per_call_us(spec_update),
        "refused create, 422 Status built": per_call_us(refused),
        "status write, spec unchanged (rule results reused)": per_call_us(status_write),
    }
    print(f"peer: jsonschema Draft4Validator.is_valid on the same schema: {peer:.0f} us per call")
    for name, value in figures.items():
        print(f"admit {name}: {value:.0f} us per call ({value / peer:.1f}x the peer)")


if __name__ == "__main__":
    main()
