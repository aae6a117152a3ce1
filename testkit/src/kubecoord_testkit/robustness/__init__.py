"""The robustness tier: client traffic on every backend under faults, every operation
recorded with its call and return on one monotonic clock, and the histories judged by
Porcupine — a linearizability checker we did not write — against models of what the API
promises, as etcd's tests/robustness judges etcd.

Modules: traffic.py (one client's KV or lock traffic; a process of its own, or a thread on
memory://), recording.py (the clients' records and their merge into one history),
backends.py (the servers, behind the fault proxy, and their restarts), runner.py (a run:
clients, the fault schedule, the verdict, the figures), checker.py (the Go checker over
Porcupine, built by ``make porcupine``; its source is testkit/porcupine/), cli.py
(``kubecoord-testkit robustness``).
"""
