"""The core shared by every backend: what is written once and used by many.

- ``lease``: the lease-style election loop (client-go's LeaderElector over a record
  store with compare-and-set), its timings, the one expiry rule and the background loop.
  The Kubernetes backend runs it over Leases, the memory backend over an in-process
  record table; ZooKeeper keeps its native ephemeral-sequential recipe.
- ``handles``: the handle scaffolding (input and closed checks, listener sets, events).
- ``translation``: a client library's exceptions -> kubecoord.errors, by a table of classes.

What does not belong here: anything that imports a third-party client (kazoo, kubernetes,
kopf), a backend, the operator or the test tooling. Layering is checked by import-linter.
"""
