"""kubecoord-testkit: the tooling that tests, benchmarks and people use around kubecoord,
shipped apart from the library (``pip install kubecoord`` installs none of it), as kopf
ships its API mock as kmock.

- ``servers``: real servers on 127.0.0.1 that a test starts and the context manager
  reaps: ZooKeeper (``zookeeper``), etcd + kube-apiserver (``kubernetes``), Cassandra
  (``cassandra``), a Spark standalone cluster (``spark``).
- ``emulator``: an in-process Kubernetes API server (``ApiEmulator``).
- ``faults``: a TCP proxy on 127.0.0.1 that delays, holds, drops and cuts the traffic
  between clients and a server (``FaultProxy`` on asyncio, ``ThreadedFaultProxy``).
- ``history_generator``: synthetic coordination event logs with known answers.
- ``soak``: many client processes under a seeded fault schedule, judged by the pipeline.
- ``storm``: two operator replicas under faults on a whole cluster, every write judged
  against the operator Lease (``make storm``).
- ``demos``: what ``make demo`` runs.
- ``pytest_plugin``: the servers as fixtures (entry point ``pytest11``).
- ``cli``: the ``kubecoord-testkit`` command (soak, robustness, storm, demo, emulator, generate-history).
- ``processes``, ``checkout``: stopping child processes; finding the repository's crds/.

What belongs here: servers and fault injectors a test starts, generators of test input,
the soak and the demos. What does not: anything an application needs at run time, and
the few helpers users import in their own unit tests (``kubecoord.testing``: ManualClock,
crash()). The testkit uses kubecoord's public modules only, never ``kubecoord._internal``
or ``_core`` (import-linter checks it), and kubecoord never imports the testkit.
"""

__version__ = "0.1.0"
"""The distribution's version, as testkit/pyproject.toml says (tests/packaging/test_version.py
checks they agree): ``kubecoord-testkit --version`` prints it."""

