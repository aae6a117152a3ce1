"""The fault proxy's first home: it lives in kubecoord.testing.fault_proxy now.

Kept so that code written against ``kubecoord.faults`` keeps importing; new code imports
``from kubecoord.testing import FaultProxy, ThreadedFaultProxy``.
"""

from kubecoord.testing.fault_proxy import Direction, FaultProxy, ProxyStats, ThreadedFaultProxy

__all__ = ["Direction", "FaultProxy", "ProxyStats", "ThreadedFaultProxy"]
