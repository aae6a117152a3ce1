"""Names of the kubecoord.dev API: group, version, kinds and plurals."""

from __future__ import annotations

GROUP = "kubecoord.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

KINDS = {"leaderelections": "LeaderElection", "groups": "Group", "kvstores": "KVStore"}
"""plural -> kind."""
PLURALS = {kind: plural for plural, kind in KINDS.items()}
"""kind -> plural."""
