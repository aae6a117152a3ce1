"""Each kind's code in one place: its status mirrors and the hooks the controller runs
after a snapshot (metrics, the event log, a Group's members adopted and departures told
apart). kubecoord.operator.handlers registers them with kopf and the controller; importing
this package registers nothing.

- leaderelection.py: LeaderElection; kvstore.py: KVStore; group/: Group (status.py the
  membership, cached.py the same from the caches, assignment.py the generation record
  and the operator-led assignment); history.py: the operator's event log they record to.

Two ways to read a resource's live state: a kubecoord handle with listeners (every
backend), or straight from the backend's shared caches with no handle per resource (the
kubernetes backend, kubecoord.capabilities.StateCache, the watch scope the operator
connects with; kubecoord.operator.mirror.caches). A cached mirror computes the status
from what the namespace's one Lease watch and one ConfigMap watch hold, the way
controller-runtime's reconcilers read their informer cache: an election's Lease, a
group's member Leases (by label) and its coordinator record, a store's shards (by label).
It keeps only the previous status's counters between snapshots; it holds no handle, no
listener and no lock of the backend. The controller maps each watch event to the
resources whose ``routes`` name the object (controller-runtime's "watch owned objects,
enqueue the owner") and reconciles those. What they read is what the handles read, by
the same rules (the backend's namespace_state.py): a leader is the record's holder unless
it expired in the operator's own observation; members are the group's Leases not expired
in it.
"""
