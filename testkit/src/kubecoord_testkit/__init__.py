"""kubecoord-testkit: the tooling that tests, benchmarks and people use around kubecoord,
shipped apart from the library (``pip install kubecoord`` installs none of it), as kopf
ships its API mock as kmock.

Packages:

- ``faults``: a TCP proxy on 127.0.0.1 that delays, holds, drops and cuts the traffic
  between clients and a server (``FaultProxy`` on asyncio, ``ThreadedFaultProxy``).

What belongs here: servers and fault injectors a test starts, generators of test input,
the soak and the demos. What does not: anything an application needs at run time, and
the few helpers users import in their own unit tests (``kubecoord.testing``: ManualClock,
crash()). The testkit uses kubecoord's public modules only, never ``kubecoord._internal``.
"""
