"""``kubecoord-testkit soak``: many client processes on one backend under a seeded schedule of
faults, then the analytics pipeline over every process's event log.

Modules: schedule.py (the seeded schedule, pure), worker.py (one client process:
candidate, group member or KV writer), processes.py (starting, killing, pausing the
workers), backends.py (the servers under test with a fault proxy in front of each, and
their restarts), operator.py (on Kubernetes: the CRDs, the soak's resources and a
``kubecoord operator`` process, which re-creates deleted backing objects), deletions.py
(Leases and ConfigMaps deleted behind the clients' backs),
runner.py (running the schedule), verdict.py (the pipeline and the figures), cli.py.

What a multi-process soak covers: zookeeper:// (a 3-node ensemble), kubernetes:// on
the API emulator and on a real kube-apiserver with etcd. memory:// is in-process only,
so it is not covered here (its own tests crash it with kubecoord.testing.crash()).
"""
