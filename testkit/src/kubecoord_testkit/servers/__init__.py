"""Real servers that tests, benchmarks and the soak start on 127.0.0.1, each a context
manager that stops and reaps what it started (PID 1 here does not reap orphans).

- ``zookeeper``: ZooKeeperServer, standalone or a loopback ensemble (Debian's jars).
- ``kubernetes``: RealApiServer, etcd and the real kube-apiserver (../shared/k8s).
- ``cassandra``: CassandraServer, one Cassandra 5.0 node or a loopback cluster (Maven's jars).
- ``managed``: what they share: free ports, readiness waits, the start/stop context
  manager. Stopping processes is ``kubecoord_testkit.processes``.
"""
