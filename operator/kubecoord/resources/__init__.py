"""One model of the kubecoord.dev custom resources (LeaderElection, Group, KVStore), used
by the client binding (backends/kubernetes/binding.py) and the operator (operator/model.py).
Their group, version, kinds and plurals are wire contracts (kubecoord.wire.crd).

- ``quantities``: the one parser of ``sizeLimit`` quantities and the kubectl-style printer.
- ``specs``: what a spec says, with the CRD's defaults (timings: kubecoord.timings) as the one fallback for a field a
  resource lacks (written before the default existed, or not admitted by an API server):
  the backend and its connect() URL, election and member timings, the size limit.

- ``credentials``: connect() options from the Secret a spec names for its backend's
  credentials (``spec.etcd.secretName``), the one reading the operator and the client
  binding share; it writes TLS material to private files, its only side effect.

Functions of the resources' JSON: no client library, no backend, no operator.
"""

from kubecoord.resources.quantities import human_bytes, parse_quantity
from kubecoord.resources.specs import (
    DEFAULT_SIZE_LIMIT,
    BackendSpec,
    election_timing_overrides,
    member_timings,
    size_limit_bytes,
)

__all__ = [
    "DEFAULT_SIZE_LIMIT",
    "BackendSpec",
    "election_timing_overrides",
    "human_bytes",
    "member_timings",
    "parse_quantity",
    "size_limit_bytes",
]
