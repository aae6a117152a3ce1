"""Locks, semaphores and the runners, written once over the public interface.

What belongs here: ``lock`` (ElectionLock: a Lock held through a leader-election record),
``semaphore`` (SlotSemaphore: N such locks), ``running`` (the election and lock runners:
client-go's RunOrDie, kazoo's Election.run), ``identity`` (default holder ids),
``signals`` (SIGTERM/SIGINT to a stop event). Users reach them through
``coord.lock()``, ``coord.semaphore()``, ``LeaderElection.run()`` and ``Lock.run()``.

What does not: anything backend-specific. These classes use only kubecoord.api, so every
backend that implements LeaderElection (memory, kubernetes, zookeeper, and any added
later) gets locks and semaphores with the election's safety rules and epochs.
"""
