"""Wire contracts: the layouts that several floors of kubecoord read and write.

What one process writes and another reads — a backend and the operator, a client and
the analytics pipeline, a member and ``kubecoord group`` — is defined here, once, and
every side imports it from here (never from the other side's private modules):

- ``crd``: the kubecoord.dev API group, version, kinds and plurals.
- ``object_names``: names, labels and annotations of the Kubernetes objects the
  kubernetes backend creates and the operator finds, grants and cleans up.
- ``kv_shards``: how a KV store's keys are spread over ConfigMaps (the shard count on
  shard 0, the shard of a key).
- ``kv_entries``: a key's data key inside a shard and the stored form of its entry.
- ``fences``: fenced writes' rule (a token below the domain's mark is refused) and the
  stored form of the marks (format 1: a shard's annotation, a ZooKeeper store's root).
- ``api_status``: the Kubernetes API server's error answers as kubecoord errors.
- ``json_text``: reading JSON text from the wire, every failure a ValueError.
- ``kube_credentials``: where Kubernetes credentials are found (in a pod, the kubeconfig).
- ``leader_record``: the election record (client-go's LeaderElectionRecord plus the
  holder's data), an observation of it and the one expiry rule.
- ``lease``: the pure converters between a coordination.k8s.io/v1 Lease and that record
  (client-go LeaseLock compatible), and which Lease is a group's member.
- ``group_record``: the group coordinator's record (KIP-795 generations) — its layout, the
  store and election it lives in (``derived_name``), and members' join data.
- ``events``: the coordination event log's schema — version, fields, primitives and
  event names — that producers write and the analytics pipeline reads.

The ground floor: pure functions and constants over JSON-shaped data. This package
imports only the standard library and kubecoord.errors — no backend, no client library,
no handle, nothing of the interface above it (import-linter checks it); the interface
itself reads the group record through it (Coordinator.describe_group()). Changing a
layout here changes what is on the wire: old writers and readers must keep working.
"""
