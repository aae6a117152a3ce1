"""The core shared by every backend: what is written once and used by many.

- ``lease``: the lease-style election loop (client-go's LeaderElector over a record
  store with compare-and-set), its timings, the one expiry rule and the background loop.
  The Kubernetes backend runs it over Leases, the memory backend over an in-process
  record table; ZooKeeper keeps its native ephemeral-sequential recipe.

What does not belong here: anything that imports a third-party client (kazoo, kubernetes,
kopf), a backend, the operator or the test tooling. Layering is checked by import-linter.
"""
