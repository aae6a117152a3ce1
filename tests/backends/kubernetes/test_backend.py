"""The Kubernetes backend against the API emulator: what the contract suite cannot see —
object layout, client-go interop, errors, timeouts, watches and request counts."""

from __future__ import annotations

import json
import pathlib
import socket
import threading
import time
from typing import Any

import pytest
from kubernetes import client as k8s

import kubecoord
from kubecoord import (
    BackendUnavailableError,
    InvalidArgumentError,
    KeyExistsError,
    Leader,
    PermissionDeniedError,
    StoreFullError,
    ValueTooLargeError,
    Versioned,
)
from kubecoord.testing import crash
from kubecoord.wire import object_names
from kubecoord.wire.lease import format_micro_time, from_unix, parse_micro_time
from kubecoord_testkit.emulator import ApiEmulator
from tests.helpers import Recorder, eventually

from .conftest import FAST, Connect, grant, kubeconfig_for

LEASE_VERBS = ["get", "list", "watch", "create", "update", "delete"]


def _lease(api: ApiEmulator, name: str) -> dict[str, Any]:
    return next(obj for obj in api.objects("leases", "default") if obj["metadata"]["name"] == name)


def _writes(api: ApiEmulator) -> list[Any]:
    return [r for r in api.requests if r.verb in ("create", "update", "delete", "patch")]


# -- the Lease is client-go's ------------------------------------------------------------


def test_election_lease_has_client_go_fields_and_renewals_change_it(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    election = connect().leader_election(name)
    assert election.nominate("pod-a", data="host=10.0.0.7")
    spec = _lease(api_emulator, name)["spec"]
    assert spec["holderIdentity"] == "pod-a"
    assert spec["leaseDurationSeconds"] == FAST["lease_duration"] and isinstance(spec["leaseDurationSeconds"], int)
    assert spec["leaseTransitions"] == 1
    first_renew = parse_micro_time(spec["renewTime"])
    assert parse_micro_time(spec["acquireTime"]) == first_renew and first_renew is not None
    assert first_renew.microsecond != 0 or spec["renewTime"].count(".") == 1  # MicroTime keeps microseconds
    eventually(lambda: parse_micro_time(_lease(api_emulator, name)["spec"]["renewTime"]) != first_renew)
    assert _lease(api_emulator, name)["spec"]["leaseTransitions"] == 1  # renewals are not transitions
    annotations = _lease(api_emulator, name)["metadata"]["annotations"]
    assert json.loads(annotations[object_names.HOLDER_DATA_ANNOTATION]) == {"holder": "pod-a", "data": "host=10.0.0.7"}


def test_release_writes_empty_holder_and_keeps_transitions(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    election = connect().leader_election(name)
    election.nominate("pod-a")
    election.resign("pod-a")
    spec = _lease(api_emulator, name)["spec"]
    assert spec["holderIdentity"] == "" or "holderIdentity" not in spec or spec["holderIdentity"] is None
    assert spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 1
    assert election.get_leader() is None


class GoController:
    """A client-go LeaseLock holder, played by the official client writing the same fields."""

    def __init__(self, admin_api: k8s.ApiClient, name: str, identity: str = "go-controller-7d9f") -> None:
        self.api = k8s.CoordinationV1Api(admin_api)
        self.name, self.identity = name, identity
        self.stop = threading.Event()
        now = format_micro_time(from_unix(time.time()))
        self.api.create_namespaced_lease("default", {
            "metadata": {"name": name},
            "spec": {"holderIdentity": identity, "leaseDurationSeconds": 2, "acquireTime": now, "renewTime": now,
                     "leaseTransitions": 6},
        })
        self.thread = threading.Thread(target=self._renew, daemon=True)
        self.thread.start()

    def _renew(self) -> None:
        while not self.stop.wait(0.4):
            lease = self.api.read_namespaced_lease(self.name, "default")
            lease.spec.renew_time = from_unix(time.time())
            self.api.replace_namespaced_lease(self.name, "default", lease)

    def release(self) -> None:
        self.stop.set()
        self.thread.join()
        lease = self.api.read_namespaced_lease(self.name, "default")
        lease.spec.holder_identity, lease.spec.lease_duration_seconds = "", 1
        self.api.replace_namespaced_lease(self.name, "default", lease)


def test_a_client_go_holder_is_respected_while_it_renews_and_its_release_is_taken_at_once(
    api_emulator: ApiEmulator, admin_api: k8s.ApiClient, connect: Connect, name: str
) -> None:
    go = GoController(admin_api, name)
    try:
        election = connect().leader_election(name)
        seen: Recorder[str | None] = Recorder()
        election.add_listener(seen)
        assert not election.nominate("py-a")
        seen.wait_last("go-controller-7d9f")
        assert election.get_leader() == Leader("go-controller-7d9f", "", 6)
        time.sleep(6.0)  # three of its 2 s leases: its renewals keep it held
        assert not election.is_leader()
        assert _lease(api_emulator, name)["spec"]["holderIdentity"] == "go-controller-7d9f"
    finally:
        go.release()
    seen.wait_last("py-a")
    assert election.get_leader() == Leader("py-a", "", 7)


def test_a_dead_client_go_holder_expires_by_observation_not_by_its_timestamps(
    admin_api: k8s.ApiClient, connect: Connect, name: str
) -> None:
    """renewTime far in the future (a skewed clock) must not keep the Lease alive forever."""
    future = format_micro_time(from_unix(time.time() + 3600))
    k8s.CoordinationV1Api(admin_api).create_namespaced_lease("default", {
        "metadata": {"name": name},
        "spec": {"holderIdentity": "skewed", "leaseDurationSeconds": 1, "renewTime": future, "leaseTransitions": 2},
    })
    election = connect().leader_election(name)
    assert not election.nominate("py-a")
    eventually(lambda: election.is_leader("py-a"))
    assert election.get_leader() == Leader("py-a", "", 3)


# -- errors ------------------------------------------------------------------------------


def test_no_rights_is_permission_denied_naming_verb_and_resource(
    api_emulator: ApiEmulator, connect: Connect, tmp_path: pathlib.Path, name: str
) -> None:
    config = kubeconfig_for(api_emulator, tmp_path, api_emulator.token_for_service_account("default", "nobody"))
    coordinator = connect(kubeconfig=config)
    # "get <kind>" when the session emulator has the CRDs (after tests/operator), else the Lease/ConfigMap verb.
    with pytest.raises(PermissionDeniedError, match=r"(list leases|get leaderelections).*403"):
        coordinator.leader_election(name).nominate("a")
    with pytest.raises(PermissionDeniedError, match=r"(list configmaps|get kvstores).*403"):
        coordinator.storage(name).fetch("k")
    unknown = connect(kubeconfig=kubeconfig_for(api_emulator, tmp_path, "not-a-token"))
    with pytest.raises(PermissionDeniedError, match=r"401"):  # at the first request: discovery for the binding
        unknown.group_membership(name).membership()


def test_read_only_rights_deny_the_write_and_write_nothing(
    api_emulator: ApiEmulator, admin_api: k8s.ApiClient, connect: Connect, tmp_path: pathlib.Path, name: str
) -> None:
    grant(admin_api, name, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
    config = kubeconfig_for(api_emulator, tmp_path, api_emulator.token_for_service_account("default", name))
    kv = connect(kubeconfig=config).storage(name)
    assert kv.fetch("k").result() is None
    with pytest.raises(PermissionDeniedError, match=r"create configmaps 'kubecoord-kv\.t-.*403"):
        kv.put("k", "v")
    assert not [o for o in api_emulator.objects("configmaps", "default") if o["metadata"]["name"].endswith(name)]


def test_unreachable_api_server_is_backend_unavailable(connect: Connect, tmp_path: pathlib.Path, name: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    coordinator = connect(kubeconfig=str(config))
    with pytest.raises(BackendUnavailableError, match=r"discover kubecoord\.dev|list leases"):  # binding first
        coordinator.leader_election(name).nominate("a")
    with pytest.raises(BackendUnavailableError):
        coordinator.storage(name).put("k", "v")
    with pytest.raises(BackendUnavailableError):
        coordinator.group_membership(name).join("m")


def test_a_hung_api_server_cannot_hold_a_leader_past_its_renew_deadline(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    """request_timeout is 30 s, but while leading a request is cut at the renew deadline."""
    coordinator = connect(request_timeout=30.0)
    election = coordinator.leader_election(name)
    kv = connect(request_timeout=0.5).storage(name)
    kv.fetch("warm").result()
    seen: Recorder[str | None] = Recorder()
    election.add_listener(seen)
    assert election.nominate("a")
    seen.wait_last("a")
    api_emulator.hang(True)
    try:
        hung_at = time.monotonic()
        seen.wait_last(None, timeout=10)  # the elector's thread came back from its hung renewal
        assert not election.is_leader()
        assert time.monotonic() - hung_at < 30.0  # not the request timeout: the renew deadline
        with pytest.raises(BackendUnavailableError):
            kv.put("k", "v")
    finally:
        api_emulator.hang(False)
    seen.wait_last("a", timeout=15)  # the server answers again: the candidate acquires anew
    leader = election.get_leader()
    assert leader is not None and leader.epoch == 2


# -- watches -----------------------------------------------------------------------------


def test_one_watch_per_store_and_reads_from_a_warm_watch_cost_no_request(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    coordinator = connect()
    kv, registry = coordinator.storage(name), coordinator.listener_registry(name)
    api_emulator.reset_requests()
    listeners = [Recorder[str | None]() for _ in range(3)]
    for index, listener in enumerate(listeners):
        registry.add_value_change_listener(f"k{index}", listener)
    key_sets: Recorder[set[str]] = Recorder()
    registry.add_key_set_change_listener("", key_sets)
    kv.put("k0", "v")
    listeners[0].wait_last("v")
    eventually(lambda: any(r.watch for r in api_emulator.requests))
    configmap_watches = [r for r in api_emulator.requests if r.watch and r.resource == "configmaps"]
    assert len(configmap_watches) == 1
    api_emulator.reset_requests()
    for _ in range(20):
        assert kv.fetch("k0").result() == "v"
        assert kv.fetch_versioned("k1").result() is None
        assert kv.children() == {"k0"}
    assert [r for r in api_emulator.requests if not r.watch] == []
    api_emulator.reset_requests()
    kv.update("k0", "w")
    assert [(r.verb, r.resource) for r in api_emulator.requests if not r.watch] == [("update", "configmaps")]


def test_watch_resumes_after_breaks_and_relists_after_410_without_duplicates(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    registry = connect().listener_registry(name)
    writer = connect().storage(name)
    seen: Recorder[str | None] = Recorder()
    registry.add_value_change_listener("k", seen)
    writer.put("k", "1")
    seen.wait_last("1")
    api_emulator.break_watches()
    writer.update("k", "2")
    seen.wait_last("2")
    # Make the stream's resourceVersion too old: a write elsewhere, compaction, a break.
    connect().storage(f"{name}-other").put("x", "y")
    api_emulator.reset_requests()
    api_emulator.compact()
    api_emulator.break_watches()
    # An informer of this store (the registry's or the writer's, unless a bookmark had
    # already moved it past the compaction) was told 410 and re-listed.
    eventually(lambda: any(
        r.verb == "list" and r.resource == "configmaps" and r.status == 200
        and r.query.get("fieldSelector") == f"metadata.name={object_names.store_configmap_name(name)}"
        for r in api_emulator.requests
    ))
    writer.update("k", "3")
    seen.wait_last("3")
    time.sleep(0.5)
    assert seen.calls == ["1", "2", "3"]  # nothing lost, nothing delivered twice


# -- KV specifics ------------------------------------------------------------------------


def test_store_refuses_beyond_one_configmap_and_writes_nothing(connect: Connect, name: str) -> None:
    kv = connect().storage(name)
    value = "v" * kv.max_value_bytes
    written = 0
    with pytest.raises(StoreFullError, match=r"1 MiB"):
        while True:
            kv.put(f"big/{written}", value)
            written += 1
    assert written == 3  # 4 x 256 KiB plus envelopes is over 1 MiB
    assert kv.fetch(f"big/{written}").result() is None
    other = connect().storage(name)
    assert other.children("big") == {str(i) for i in range(written)}
    kv.delete("big/0")
    assert kv.put(f"big/{written}", value) == 1


def test_a_value_too_large_once_escaped_is_refused_before_any_request(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    kv = connect().storage(name)
    kv.put("small", "x")
    escaped = "\x01" * (200 * 1024)  # 200 KiB in UTF-8, 1.2 MB as JSON in a ConfigMap
    # What a put or an update would send: reads of one object and writes. The informer's own
    # watch re-opens and re-lists run in the background and may land in this window on a
    # loaded machine (one did in a fresh-clone run at load 28); they are not the put's.
    sent = [r for r in api_emulator.requests if r.verb not in ("watch", "list")]
    with pytest.raises(ValueTooLargeError, match=r"as stored .* over the 1048576 bytes one ConfigMap can hold"):
        kv.put("control", escaped)
    with pytest.raises(ValueTooLargeError):
        kv.update("small", escaped)
    assert [r for r in api_emulator.requests if r.verb not in ("watch", "list")] == sent
    assert kv.fetch("small").result() == "x" and kv.fetch("control").result() is None
    # What fits once escaped still goes through, control characters included.
    fits = "\x01" * (100 * 1024)
    assert kv.update("small", fits) == 2
    assert connect().storage(name).fetch("small").result() == fits


def test_writes_to_different_keys_from_many_clients_never_conflict(connect: Connect, name: str) -> None:
    stores = [connect().storage(name) for _ in range(4)]
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            for round_ in range(15):
                key = f"writer-{index}"
                if round_ == 0:
                    stores[index].put(key, "0")
                else:
                    stores[index].update(key, str(round_))
        except BaseException as exc:  # collected: the test reports them
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    reader = connect().storage(name)
    assert {reader.fetch_versioned(f"writer-{i}").result() for i in range(4)} == {Versioned("14", 15)}


def test_keys_are_readable_configmap_data(api_emulator: ApiEmulator, connect: Connect, name: str) -> None:
    connect().storage(name).put("topics/orders.v2", "x")
    configmap = next(o for o in api_emulator.objects("configmaps", "default")
                     if o["metadata"]["name"] == object_names.store_configmap_name(name))
    assert configmap["metadata"]["labels"][object_names.STORE_LABEL] == name
    assert json.loads(configmap["data"]["topics.orders_2ev2"]) == {"k": "topics/orders.v2", "v": 1, "d": "x"}


# -- groups ------------------------------------------------------------------------------


def test_expired_member_is_deleted_by_a_watcher_and_its_id_can_be_taken(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    doomed = connect()
    doomed.group_membership(name).join("w1", data="old")
    watcher = connect().group_membership(name)
    seen: Recorder[set[str]] = Recorder()
    watcher.add_listener(seen)
    assert watcher.membership() == {"w1": "old"}
    member_leases = [o for o in api_emulator.objects("leases", "default")
                     if (o["metadata"].get("labels") or {}).get(object_names.GROUP_LABEL) == name]
    assert [o["metadata"]["name"] for o in member_leases] == [object_names.member_lease_name(name, "w1")]
    crash(doomed)
    seen.wait_last(set(), timeout=10)
    eventually(lambda: not [o for o in api_emulator.objects("leases", "default")
                            if (o["metadata"].get("labels") or {}).get(object_names.GROUP_LABEL) == name])
    newcomer = connect().group_membership(name)
    newcomer.join("w1", data="new")
    seen.wait_last({"w1"})
    assert watcher.membership() == {"w1": "new"}


def test_an_observer_of_an_empty_group_wakes_for_a_member_and_reaps_it_when_it_expires(
    api_emulator: ApiEmulator, connect: Connect, name: str
) -> None:
    """The operator's case: a handle that only observes a group with no member takes no
    step (its loop is parked) until a change; then it must still see the member, and
    reap it once it stops renewing, as an observer that stepped all along would."""
    watcher = connect().group_membership(name)
    seen: Recorder[set[str]] = Recorder()
    watcher.add_listener(seen)
    assert watcher.membership() == {}
    time.sleep(1.0)  # parked by now: nothing to renew, nothing that can expire
    doomed = connect()
    doomed.group_membership(name).join("w1", data="d")
    seen.wait_last({"w1"})
    crash(doomed)
    seen.wait_last(set(), timeout=10)
    eventually(lambda: not [o for o in api_emulator.objects("leases", "default")
                            if (o["metadata"].get("labels") or {}).get(object_names.GROUP_LABEL) == name])


# -- connecting --------------------------------------------------------------------------


def test_namespace_comes_from_the_url_else_the_kubeconfig_context(
    api_emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    config = api_emulator.write_kubeconfig(tmp_path / "kc", namespace="team-a")
    with kubecoord.connect("kubernetes://", kubeconfig=str(config)) as coordinator:
        assert coordinator.namespace == "team-a"  # type: ignore[attr-defined]
    with kubecoord.connect("kubernetes://team-b", kubeconfig=str(config)) as coordinator:
        assert coordinator.namespace == "team-b"  # type: ignore[attr-defined]


def test_in_cluster_configuration_reads_the_service_account(
    api_emulator: ApiEmulator, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubecoord.backends.kubernetes import config

    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(api_emulator.admin_token)
    (account / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # read only for https
    (account / "namespace").write_text("pods-ns\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(api_emulator.port))
    loaded = config.load("", service_account_dir=account)
    assert (loaded.source, loaded.namespace) == ("in-cluster", "pods-ns")
    assert loaded.configuration.host == f"https://127.0.0.1:{api_emulator.port}"
    assert config.load("explicit", service_account_dir=account).namespace == "explicit"


@pytest.mark.parametrize(
    "options",
    [
        {"lease_duration": 10, "renew_deadline": 10},
        {"renew_deadline": 2, "retry_period": 2},
        {"retry_period": 0},
        {"request_timeout": -1},
        {"max_value_bytes": 2 * 1024 * 1024},
        {"bogus": 1},
        {"kubeconfig": "/nonexistent/kubeconfig"},
    ],
)
def test_bad_options_are_rejected_at_connect(kubeconfig_path: pathlib.Path, options: dict[str, Any]) -> None:
    options.setdefault("kubeconfig", str(kubeconfig_path))
    with pytest.raises(InvalidArgumentError):
        kubecoord.connect("kubernetes://default", **options)


@pytest.mark.parametrize("text", ["apiVersion: v1\nclusters: [\n", "\tkind: Config\n", "a: b: c\n"])
def test_a_kubeconfig_that_is_not_yaml_is_an_invalid_argument(tmp_path: pathlib.Path, text: str) -> None:
    # The YAML parser's own errors (not ValueErrors) came out of connect() untranslated.
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match="cannot load kubeconfig"):
        kubecoord.connect("kubernetes://default", kubeconfig=str(path))


def test_per_handle_timings_are_validated(connect: Connect, name: str) -> None:
    coordinator = connect()
    with pytest.raises(InvalidArgumentError):
        coordinator.leader_election(name, lease_duration=1.0)  # type: ignore[call-arg]
    election = coordinator.leader_election(name, lease_duration=5, renew_deadline=4, retry_period=1)  # type: ignore[call-arg]
    assert election.nominate("a")


def test_history_records_the_holders_view(connect: Connect, tmp_path: pathlib.Path, name: str) -> None:
    log = tmp_path / "history.jsonl"
    coordinator = connect(history=str(log))
    election = coordinator.leader_election(name)
    election.nominate("a")
    time.sleep(FAST["retry_period"] * 2.5)
    election.resign("a")
    kv = coordinator.storage(name)
    kv.put("k", "1")
    kv.update("k", "2")
    with pytest.raises(kubecoord.VersionConflictError):
        kv.update("k", "3", expected_version=1)
    group = coordinator.group_membership(name)
    group.join("m")
    group.leave("m")
    coordinator.close()
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert {e["backend"] for e in events} == {"kubernetes"} and {e["namespace"] for e in events} == {"default"}
    kinds = [e["event"] for e in events]
    for kind in ("acquired", "renewed", "resigned", "put", "updated", "conflict", "joined", "left"):
        assert kind in kinds, kind
    acquired = next(e for e in events if e["event"] == "acquired")
    assert acquired["epoch"] == 1 and acquired["member"] == "a" and "valid_until" in acquired
    assert next(e for e in events if e["event"] == "updated")["version"] == 2
    assert next(e for e in events if e["event"] == "conflict")["version"] == 1  # the stale expected_version


def test_observers_log_the_leader_they_see_with_its_epoch(connect: Connect, tmp_path: pathlib.Path, name: str) -> None:
    log = tmp_path / "observer.jsonl"
    observer = connect(history=str(log)).leader_election(name)
    seen: Recorder[str | None] = Recorder()
    observer.add_listener(seen)
    connect().leader_election(name).nominate("pod-a")
    seen.wait_last("pod-a")
    eventually(lambda: log.exists() and '"observed"' in log.read_text())
    observed = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "observed"]
    assert [(e["member"], e["epoch"]) for e in observed] == [("pod-a", 1)]


def test_a_member_whose_lease_is_deleted_is_out_until_it_joins_again(
    api_emulator: ApiEmulator, admin_api: k8s.ApiClient, connect: Connect, name: str, tmp_path: pathlib.Path
) -> None:
    log = tmp_path / "events.jsonl"
    group = connect(history=str(log)).group_membership(name)
    seen: Recorder[set[str]] = Recorder()
    group.add_listener(seen)
    group.join("w1")
    seen.wait_last({"w1"})
    lease = object_names.member_lease_name(name, "w1")
    k8s.CoordinationV1Api(admin_api).delete_namespaced_lease(lease, "default")  # as the operator does
    seen.wait_last(set())
    # The handle expels its member at its next heartbeat (once per retry period; later on a
    # loaded machine), which records "expired"; until then join() says it is joined.
    eventually(lambda: "expired" in _group_events(log, "w1"), timeout=30)
    time.sleep(3 * FAST["retry_period"])  # heartbeats would have re-created it by now
    assert lease not in {o["metadata"]["name"] for o in api_emulator.objects("leases", "default")}
    assert group.membership_list() == set()
    group.join("w1")
    seen.wait_last({"w1"})


def _group_events(log: pathlib.Path, member: str) -> list[str]:
    events = (json.loads(line) for line in log.read_text().splitlines()) if log.exists() else iter(())
    return [e["event"] for e in events if e.get("primitive") == "group" and e.get("member") == member]


def test_a_token_the_in_cluster_refresher_cannot_read_is_backend_unavailable(
    api_emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    """The in-cluster loader re-reads the token from inside each request (a refresh hook); an
    empty token file raises its ConfigException there, which used to escape untranslated."""
    from kubernetes.config.config_exception import ConfigException

    from kubecoord.backends.kubernetes.client import LEASES, KubeClient
    from kubecoord.backends.kubernetes.transport import Transport

    def rotating_token_gone(configuration: k8s.Configuration) -> None:
        raise ConfigException("Token file exists but empty.")

    configuration = k8s.Configuration(host=api_emulator.url)
    configuration.api_key = {"BearerToken": "bearer expired"}
    configuration.refresh_api_key_hook = rotating_token_gone
    client = KubeClient(Transport(configuration), "default", request_timeout=2.0)
    with pytest.raises(BackendUnavailableError, match="credentials unavailable"):
        client.get(LEASES, "anything")


def test_a_lease_deleted_behind_the_candidates_backs_never_sends_the_epoch_backwards(
    admin_api: k8s.ApiClient, connect: Connect, name: str
) -> None:
    holder_side = connect()
    first, second = connect().leader_election(name), holder_side.leader_election(name)
    assert first.nominate("pod-a")
    assert not second.nominate("pod-b")
    first.resign("pod-a")
    eventually(lambda: second.is_leader("pod-b"), timeout=10)
    leader = second.get_leader()
    assert leader is not None and leader.epoch == 2
    third = connect().leader_election(name)
    assert not third.nominate("pod-c")
    eventually(lambda: third.get_leader() == leader, timeout=10)  # pod-c has seen epoch 2
    crash(holder_side)  # pod-b stops renewing, and never puts the Lease back
    deleted = time.monotonic()
    k8s.CoordinationV1Api(admin_api).delete_namespaced_lease(name, "default")
    eventually(lambda: third.is_leader("pod-c"), timeout=30)
    # It waited a whole lease from the deletion (the old holder's view may last that long)
    # and carried on from the epoch it had seen, not from 1.
    assert time.monotonic() - deleted >= FAST["lease_duration"]
    assert third.get_leader() == kubecoord.Leader("pod-c", "", 3)


def test_a_lease_deleted_under_its_live_holder_is_put_back_by_it_in_the_same_term(
    admin_api: k8s.ApiClient, connect: Connect, name: str
) -> None:
    """A Lease nobody owns (no LeaderElection): the holder's renewal, a PUT, creates it again
    (as the real server does, and client-go's holder) with its own record — the same holder
    and epoch; the others, who saw it vanish, wait a whole lease and then find it held."""
    holder, other = connect().leader_election(name), connect().leader_election(name)
    assert holder.nominate("pod-a")
    assert not other.nominate("pod-b")
    leases = k8s.CoordinationV1Api(admin_api)
    leases.delete_namespaced_lease(name, "default")
    eventually(lambda: leases.list_namespaced_lease("default", field_selector=f"metadata.name={name}").items,
               timeout=10)
    deadline = time.monotonic() + 2 * FAST["lease_duration"]
    while time.monotonic() < deadline:
        assert not (holder.is_leader("pod-a") and other.is_leader("pod-b")), "two leaders"
        time.sleep(0.05)
    assert holder.is_leader("pod-a")
    assert holder.get_leader() == other.get_leader() == kubecoord.Leader("pod-a", "", 1)


def test_kv_events_name_the_store_incarnation_a_deletion_replaces(
    admin_api: k8s.ApiClient, connect: Connect, tmp_path: pathlib.Path, name: str
) -> None:
    log = tmp_path / "writer.jsonl"
    store = connect(history=str(log)).storage(name)
    store.put("x", "1")
    store.update("x", "2", expected_version=1)
    k8s.CoreV1Api(admin_api).delete_namespaced_config_map(object_names.store_shard_name(name, 0), "default")

    def put_again() -> bool:
        try:
            store.put("x", "1")  # the store is gone: the key is created again at version 1
        except KeyExistsError:
            return False  # the cache has not seen the deletion yet
        return True

    eventually(put_again, timeout=10)
    eventually(lambda: log.exists() and log.read_text().count('"event":"put"') == 2)
    writes = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] in ("put", "updated")]
    assert [(e["event"], e["version"]) for e in writes] == [("put", 1), ("updated", 2), ("put", 1)]
    first, second = (e["store_incarnation"] for e in (writes[0], writes[2]))
    assert first and second and first != second
    assert writes[1]["store_incarnation"] == first


def test_a_leave_the_server_did_not_answer_leaves_the_member_in_and_renewing(
    connect: Connect, tmp_path: pathlib.Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "member.jsonl"
    group = connect(history=str(log)).group_membership(name)
    group.join("w1")
    client = group._context.client  # type: ignore[attr-defined]
    real_delete = client.delete

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailableError("cannot delete leases: connection reset by peer")

    monkeypatch.setattr(client, "delete", unreachable)
    with pytest.raises(BackendUnavailableError):
        group.leave("w1")
    monkeypatch.setattr(client, "delete", real_delete)
    # Still a member, still renewing: past a whole lease it is listed, nobody reaped it.
    time.sleep(FAST["lease_duration"] + 1)
    assert connect().group_membership(name).membership_list() == {"w1"}
    group.leave("w1")  # the retry leaves
    eventually(lambda: log.exists() and '"left"' in log.read_text())
    events = [e["event"] for e in map(json.loads, log.read_text().splitlines()) if e["primitive"] == "group"]
    assert [e for e in events if e != "renewed"] == ["joined", "left"]
