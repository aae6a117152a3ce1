"""Demos, one place: what ``kubecoord-testkit demo`` and ``make demo`` run.

- ``cli``: the ``kubecoord-testkit demo`` subcommand (``python -m kubecoord_testkit.demos`` runs it too).
- ``memory_scenario``: the in-process scenario on a memory:// URL (~1 s).
- ``operator_scenario``: the end-to-end demo: the API emulator (or $KUBECONFIG's cluster),
  the operator, candidate and member processes, a leader killed with -9 (~30 s).
- ``worker``: the candidate/member process that operator_scenario starts.

Nothing in the library imports this package; it sits above the operator.
"""
