"""The operator's coordination event log (``kubecoord operator --history PATH``).

Guarantees: nothing is recorded while no target is set; every event carries
source="operator" (kubecoord.wire.events.Source.OPERATOR). Recording never blocks on
disk I/O (kubecoord.history's guarantee).
"""

from __future__ import annotations

from typing import Any, ClassVar

from kubecoord.history import EventLog, HistoryTarget, open_event_log
from kubecoord.operator.model import BackendSpec
from kubecoord.wire.events import Source


class History:
    """The operator's coordination event log (``kubecoord operator --history PATH``).

    One JsonlEventLog per (backend, namespace), all appending to the same target, with
    source="operator"; nothing is recorded while no target is set.
    """

    target: HistoryTarget = None
    _logs: ClassVar[dict[tuple[str, str], EventLog]] = {}

    @classmethod
    def record(cls, backend: BackendSpec, namespace: str, **fields: Any) -> None:
        if cls.target is None:
            return
        key = (backend.backend, namespace)
        if key not in cls._logs:
            cls._logs[key] = open_event_log(
                cls.target, backend=backend.backend, namespace=namespace, source=Source.OPERATOR
            )
        cls._logs[key].record(**fields)

    @classmethod
    def close(cls) -> None:
        logs, cls._logs = list(cls._logs.values()), {}
        for event_log in logs:
            event_log.close()
