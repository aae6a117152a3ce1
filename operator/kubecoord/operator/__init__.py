"""The kubecoord operator: kopf handlers for the LeaderElection, Group and KVStore CRDs.

What belongs here: everything that runs inside the operator process — the kopf handlers
(one module per CRD in ``handlers/``), the status mirrors, the RBAC objects made from
``spec.clients``, the operator's own high availability, its metrics and its command.
kopf is imported only inside this package (an import-linter contract checks it).

What does not: the coordination protocols themselves. The operator is the control plane
— it creates, validates, cleans up, reports and grants access — and talks to a backend
through the same kubecoord interface applications use (on kubernetes it reads status
from the backend's shared caches, the declared capability
kubecoord.capabilities.StateCache, instead of a handle per resource); clients never go
through it.
"""
