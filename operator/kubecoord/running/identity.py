"""Default holder and candidate ids: unique per object, readable in kubectl and zkCli."""

from __future__ import annotations

import os
import socket
import uuid


def default_id() -> str:
    """host-pid-random: unique per call, so two objects in one process never share an id
    (a Lease holder sharing its id with another elector would take the other's renewals
    for its own)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
