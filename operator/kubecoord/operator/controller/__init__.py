"""The operator's status side as a controller (client-go's informers + work queue), laid
out as controller-runtime lays one out: one job per module.

What belongs here: the rate-limited, de-duplicating work queue (``workqueue``); the
reconciler that drains it with a bounded pool of workers (``reconciler``: inputs, workers,
one reconcile, drift repair); the periodic resync (``resync``); the routing of owned
objects' events to the resources that read them (``routing``); what it keeps per
resource and the informer cache of the three kinds (``cache``); the status it writes
(``status``) and how (``status_writer``); what a spec asks to be written (``spec``); the
finalizer's clean-up after a deletion (``finalizer``); which resources an object's event wakes (``owners``).
Events never do work: the CRD watch (kopf's, one per kind) and the backend's shared
informers (one per kind and namespace, behind the status mirrors' listeners) only put the
owning resource's key on the queue. Nothing runs per resource while nothing changes.

What does not: each kind's status mirrors and hooks (``kubecoord.operator.kinds``), kopf's
registration of the watches (``kubecoord.operator.handlers``), and the coordination
protocols themselves.
"""
