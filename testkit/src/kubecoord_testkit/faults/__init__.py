"""Fault injection between clients and servers: the TCP fault proxy (module ``proxy``) and a
scripted server whose connections go to a handler of the test's (module ``server``).

Knows nothing about coordination: no backends, clients or analytics (an import-linter
contract says so), so any TCP server can sit behind it.
"""

from kubecoord_testkit.faults.proxy import Direction, FaultProxy, ProxyStats, ThreadedFaultProxy
from kubecoord_testkit.faults.server import Handler, Request, ScriptedServer, StartServer, http_answer

__all__ = ["Direction", "FaultProxy", "Handler", "ProxyStats", "Request", "ScriptedServer", "StartServer",
           "ThreadedFaultProxy", "http_answer"]
