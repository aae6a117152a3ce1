"""The runners behind ``LeaderElection.run()`` and ``Lock.run()``, and what they need.

What belongs here: ``runners`` (client-go's RunOrDie and kazoo's Election.run, over the
small protocols ``Candidacy`` and ``Holding`` they declare), ``identity`` (default holder
and candidate ids), ``signals`` (SIGTERM/SIGINT to a stop event).

What does not: anything that implements the interface. This package sits below
kubecoord.api, which calls down to it; it imports kubecoord.errors only, so the interface
and its runners form no circle (import-linter's layers contract checks it).
"""
