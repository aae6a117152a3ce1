"""The operator's two-replica storm on a whole cluster (``kubecoord-testkit storm``).

- ``judging``: every operator write in the API server's audit log compared with who held
  the operator Lease when the server received it (pure functions);
- ``replicas``: the two ``kubecoord operator`` replicas, each behind a fault proxy;
- ``runner``: the storm itself — cluster, chart objects, traffic, faults, the end state;
- ``cli``: the subcommand.

Not here: the soak (kubecoord_testkit.soak), which judges the clients' histories.
"""
