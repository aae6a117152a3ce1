"""An etcd:// URL with several endpoints, the first one hung (it accepts connections and
never answers: a frozen member, a network that drops): the coordinator moves on to the
next endpoint, so its lease, its leadership and its writes carry on."""

from __future__ import annotations

import time
import uuid
from typing import Any

import kubecoord
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError
from kubecoord_testkit.faults import ThreadedFaultProxy
from kubecoord_testkit.servers.etcd import EtcdCluster

from .timings import TIMINGS

PATIENT: dict[str, Any] = {"lease_duration": 6, "renew_deadline": 4.0, "retry_period": 0.5, "request_timeout": 2.0}
"""A keep-alive times out after 4/3 s: one lost to the hung endpoint leaves ~2 s of margin."""



def test_a_hung_first_endpoint_costs_no_leadership_and_no_write(
    etcd_server: EtcdCluster, proxies: list[ThreadedFaultProxy]
) -> None:
    prefix = f"ep-{uuid.uuid4().hex[:8]}"
    first, second = proxies
    coord = kubecoord.connect(f"etcd://{first.address},{second.address}/{prefix}", **PATIENT)
    other = kubecoord.connect(f"etcd://{etcd_server.hosts}/{prefix}", **TIMINGS)
    a, b = coord.leader_election("svc"), other.leader_election("svc")
    assert a.nominate("a")
    assert not b.nominate("b")
    first.drop()  # the first endpoint hangs
    hung = time.monotonic()
    while time.monotonic() - hung < 2 * PATIENT["lease_duration"]:  # past a's TTL had its keep-alives stopped
        assert a.is_leader("a"), "a lost its leadership to a hung endpoint"
        assert not b.is_leader("b")
        time.sleep(0.05)
    store = coord.storage("s")
    outcomes: list[object] = []
    for attempt in range(3):  # one write may be caught by the hung endpoint; the next goes elsewhere
        try:
            outcomes.append(store.put(f"k{attempt}", "v"))
            break
        except (BackendUnavailableError, OutcomeUnknownError) as exc:
            outcomes.append(exc)
    assert outcomes[-1] == 1, outcomes
    first.heal()
    coord.close()
    other.close()
