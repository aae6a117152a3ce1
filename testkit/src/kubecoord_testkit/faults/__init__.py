"""Fault injection between clients and servers: the TCP fault proxy (module ``proxy``).

Knows nothing about coordination: no backends, clients or analytics (an import-linter
contract says so), so any TCP server can sit behind it.
"""

from kubecoord_testkit.faults.proxy import Direction, FaultProxy, ProxyStats, ThreadedFaultProxy

__all__ = ["Direction", "FaultProxy", "ProxyStats", "ThreadedFaultProxy"]
