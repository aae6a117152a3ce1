"""Fault injection for tests and ``kubecoord soak``: things that break networks and processes.

- proxy: an asyncio TCP proxy on 127.0.0.1 that delays, drops (blackholes), holds and
  cuts the traffic between clients and one server (FaultProxy), and its thread-hosted
  form for synchronous code (ThreadedFaultProxy).

What belongs here: injectors that know nothing about coordination (no backend, no
client library, no analytics). What does not: the soak's schedule and its workers.
"""

from kubecoord.faults.proxy import Direction, FaultProxy, ProxyStats, ThreadedFaultProxy

__all__ = ["Direction", "FaultProxy", "ProxyStats", "ThreadedFaultProxy"]
