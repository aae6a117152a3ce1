"""The operator's status side as a controller (client-go's informers + work queue).

What belongs here: the rate-limited, de-duplicating work queue (``workqueue``) and the
status controller that drains it with a bounded pool of workers (``status``). Events
never do work: the CRD watch (kopf's, one per kind) and the backend's shared informers
(one per kind and namespace, behind the status mirrors' listeners) only put the owning
resource's key on the queue. Nothing runs per resource while nothing changes.

What does not: the create/update/delete handlers (``kubecoord.operator.handlers``), which
stay kopf's, and the coordination protocols themselves.
"""
