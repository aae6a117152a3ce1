"""Locks and semaphores, written once over the public interface.

What belongs here: ``lock`` (ElectionLock: a Lock held through a leader-election record),
``semaphore`` (SlotSemaphore: N such locks). Every kubecoord coordinator hands them out
(kubecoord._core's CoordinatorBase implements ``coord.lock()`` and ``coord.semaphore()``
with them), so this package sits above the interface and below the core.

What does not: anything backend-specific, and the runners behind
``LeaderElection.run()`` and ``Lock.run()`` (kubecoord.running, below the interface).
These classes use only kubecoord.api, so every backend that implements LeaderElection
(memory, kubernetes, zookeeper, cassandra, etcd, and any added later) gets locks and
semaphores with the election's safety rules and epochs.
"""

from kubecoord.locking.lock import ElectionLock
from kubecoord.locking.semaphore import SlotSemaphore

__all__ = ["ElectionLock", "SlotSemaphore"]
