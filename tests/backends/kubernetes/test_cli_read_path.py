"""The command line's one-shot read path (kubecoord.cli.snapshot over kubecoord.cli.kubeapi:
a few GETs, no kubernetes client) and the kubernetes backend's handles agree on the same
objects — elections (client-go's Leases and stale holder data included), groups (spoofed
member Leases included), KV stores over several shards (hashed keys and foreign data
included) — on the emulator and the real kube-apiserver. And the RBAC the read path
needs: ``get`` on the one object, by name."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

import kubecoord
from kubecoord import Coordinator, PermissionDeniedError
from kubecoord.cli import snapshot, views
from kubecoord.cli.kubeapi import KubeApi, load_credentials
from kubecoord.wire import object_names

from .clusters import Cluster
from .conftest import FAST


@pytest.fixture
def name() -> str:
    return f"rp-{uuid.uuid4().hex[:8]}"


class Fresh:
    """A new one-shot reader per use, as each command is (a reader reads a path once)."""

    def __init__(self, cluster: Cluster) -> None:
        self._credentials = load_credentials(cluster.namespace, kubeconfig=str(cluster.admin_kubeconfig))
        self._opened: list[KubeApi] = []

    @property
    def namespace(self) -> str:
        return self._credentials.namespace

    def __call__(self) -> KubeApi:
        reader = KubeApi(self._credentials, timeout=15)
        self._opened.append(reader)
        return reader

    def close(self) -> None:
        for reader in self._opened:
            reader.close()


@pytest.fixture
def api(cluster: Cluster) -> Iterator[Fresh]:
    fresh = Fresh(cluster)
    yield fresh
    fresh.close()


@pytest.fixture
def coordinators(cluster: Cluster) -> Iterator[list[Coordinator]]:
    """[writer, reader]: the reader's handles are fresh, as a command's would be."""
    opened = [kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), **FAST) for _ in range(2)]
    yield opened
    for coordinator in opened:
        coordinator.close()


def _full_leader(reader: Coordinator, service: str) -> dict[str, Any]:
    with reader.leader_election(service) as election:
        return views.leader(election)


def _eventually(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_leader_agrees(cluster: Cluster, api: Fresh, coordinators: list[Coordinator], name: str) -> None:
    writer, reader = coordinators
    nobody = {"election": name, "leader": None, "epoch": None, "data": None}
    assert views.leader(snapshot.election(api(), name)) == _full_leader(reader, name) == nobody

    election = writer.leader_election(name)
    assert election.nominate("pod-a", data='héllo {"json": 1}')
    _eventually(lambda: views.leader(snapshot.election(api(), name))["leader"] == "pod-a")
    one_shot, full = views.leader(snapshot.election(api(), name)), _full_leader(reader, name)
    assert one_shot == full
    assert full["data"] == 'héllo {"json": 1}' and full["epoch"] >= 1

    election.resign("pod-a")  # a release: empty holder, transitions kept
    _eventually(lambda: views.leader(snapshot.election(api(), name))["leader"] is None)
    assert views.leader(snapshot.election(api(), name)) == _full_leader(reader, name) == nobody


def test_client_go_lease_and_stale_holder_data_agree(cluster: Cluster, api: Fresh,
                                                     coordinators: list[Coordinator], name: str) -> None:
    """A Lease written by client-go (epoch from 0, no annotation), and one whose holder-data
    annotation belongs to an earlier holder: both paths read the same record."""
    _writer, reader = coordinators
    leases = k8s.CoordinationV1Api(cluster.admin_api)
    stale = json.dumps({"holder": "old-holder", "data": "old data"})
    for suffix, kept in (("go", None), ("stale", {object_names.HOLDER_DATA_ANNOTATION: stale})):
        leases.create_namespaced_lease(cluster.namespace, {
            "metadata": {"name": f"{name}-{suffix}", "annotations": kept},
            "spec": {"holderIdentity": "go-peer", "leaseDurationSeconds": 15, "leaseTransitions": 4},
        })
        service = f"{name}-{suffix}"
        expected = {"election": service, "leader": "go-peer", "epoch": 4, "data": ""}
        assert views.leader(snapshot.election(api(), service)) == _full_leader(reader, service) == expected


def test_members_agree(cluster: Cluster, api: Fresh, coordinators: list[Coordinator], name: str) -> None:
    writer, reader = coordinators
    members = writer.group_membership(name)
    members.join("w1", data="d1")
    members.join("W 2 ü", data="")
    leases = k8s.CoordinationV1Api(cluster.admin_api)
    # Labelled for the group but named for nobody's id, and one held by another id: no members.
    spoofed = {"metadata": {"name": f"{name}.m.spoof", "labels": {object_names.GROUP_LABEL: name},
                            "annotations": {object_names.MEMBER_ID_ANNOTATION: "intruder"}},
               "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30}}
    leases.create_namespaced_lease(cluster.namespace, spoofed)
    borrowed = object_names.member_lease_name(name, "w3")
    leases.create_namespaced_lease(cluster.namespace, {
        "metadata": {"name": borrowed, "labels": {object_names.GROUP_LABEL: name},
                     "annotations": {object_names.MEMBER_ID_ANNOTATION: "w3"}},
        "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 30}})
    with reader.group_membership(name) as group:
        full = views.members(group)
    one_shot = views.members(snapshot.group(api(), name))
    assert one_shot == full
    assert [m["id"] for m in full["members"]] == ["W 2 ü", "w1"]


def test_store_agrees(cluster: Cluster, api: Fresh, coordinators: list[Coordinator], name: str) -> None:
    """Three shards, nested and non-ASCII keys, a key too long for a readable data key, and
    data nobody wrote through kubecoord in shard 0: ls (flat and recursive) and every get agree."""
    _writer, reader = coordinators
    writer = kubecoord.connect(cluster.url, kubeconfig=str(cluster.admin_kubeconfig), kv_shards=3, **FAST)
    keys = {"a": "1", "b/c": "2", "b/d/e": "3\nwith a newline", "x y/ü": "4", "long/" + "k" * 300: "5"}
    with writer, writer.storage(name) as storage:
        for key, value in keys.items():
            storage.put(key, value)
        storage.update("a", "1 again")
    core = k8s.CoreV1Api(cluster.admin_api)
    zero = object_names.store_shard_name(name, 0)
    core.patch_namespaced_config_map(zero, cluster.namespace, {"data": {"foreign": "not an entry"}})
    with reader.storage(name) as full:
        _eventually(lambda: {e["key"] for e in views.keys(full, "", recursive=True, timeout=10)["keys"]} == set(keys))
        one_shot = snapshot.store(api(), name)
        for prefix in ("", "b", "b/d", "nothing"):
            for recursive in (False, True):
                assert views.keys(one_shot, prefix, recursive=recursive, timeout=10) == views.keys(
                    full, prefix, recursive=recursive, timeout=10), (prefix, recursive)
        for key in [*keys, "absent", "b"]:
            expected = full.fetch_versioned(key).result(10)
            got = snapshot.store(api(), name, key=key).fetch_versioned(key).result()
            assert (got.value, got.version) == (expected.value, expected.version) if expected else got is None, key
    assert snapshot.store(api(), name, key="a").fetch_versioned("a").result().version == 2
    assert views.keys(snapshot.store(api(), f"{name}-absent"), "", timeout=1)["keys"] == []


PROBE = """
import sys
from kubecoord.cli import main
status = main({argv!r})
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {{'kubernetes', 'urllib3', 'kazoo', 'kopf'}}
               or m.startswith(('kubecoord.backends', 'kubecoord.api', 'kubecoord._core')))
print('HEAVY', heavy, 'STATUS', status)
"""


def test_the_command_reads_without_the_kubernetes_client(cluster: Cluster, coordinators: list[Coordinator],
                                                         name: str) -> None:
    """``kubecoord leader`` on kubernetes:// imports no client library and no backend, and
    prints what the backend's handle says."""
    writer, reader = coordinators
    writer.leader_election(name).nominate("pod-a", data="d")
    _eventually(lambda: _full_leader(reader, name)["leader"] == "pod-a")
    argv = ["leader", name, "--url", cluster.url, "--kubeconfig", str(cluster.admin_kubeconfig), "-o", "json"]
    result = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                            timeout=120, check=False)
    output, probe = result.stdout.rsplit("HEAVY", 1)
    assert probe.strip() == "[] STATUS 0", result.stdout + result.stderr
    assert json.loads(output) == _full_leader(reader, name)


def test_get_on_the_one_object_is_enough_and_other_names_are_refused(
    cluster: Cluster, coordinators: list[Coordinator], name: str, tmp_path: pathlib.Path
) -> None:
    """RBAC by name (resourceNames): ``get`` on Lease NAME lets the read path show it; a
    Lease beside it is refused with exit 7 (permission denied), by both paths alike."""
    writer, _reader = coordinators
    for service in (name, f"{name}-other"):
        writer.leader_election(service).nominate("pod-a")
    account = f"sa-{uuid.uuid4().hex[:6]}"
    kubeconfig = cluster.service_account_kubeconfig(account, tmp_path)
    rbac = k8s.RbacAuthorizationV1Api(cluster.admin_api)
    rbac.create_namespaced_role(cluster.namespace, {"metadata": {"name": account}, "rules": [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [name],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kubecoord.dev"], "resources": ["*"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [cluster.namespace], "verbs": ["get"]},
    ]})
    rbac.create_namespaced_role_binding(cluster.namespace, {
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": cluster.namespace}],
    })
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}

    def cli(service: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kubecoord.cli", "leader", service, "--url", cluster.url,
                               "-o", "json"], capture_output=True, text=True, env=env, timeout=120, check=False)

    def allowed() -> bool:  # RBAC takes a moment to apply on the real server
        return cli(name).returncode == 0

    _eventually(allowed)
    assert json.loads(cli(name).stdout)["leader"] == "pod-a"
    refused = cli(f"{name}-other")
    assert refused.returncode == 7, refused.stderr
    assert "403" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    with kubecoord.connect(cluster.url, kubeconfig=str(kubeconfig), **FAST) as theirs, pytest.raises(
        PermissionDeniedError
    ):
        theirs.leader_election(f"{name}-other").get_leader()


@pytest.mark.parametrize("context", [None, "second"])
@pytest.mark.parametrize("url_namespace", ["", "given"])
def test_the_reader_resolves_what_the_backend_resolves(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, context: str | None, url_namespace: str
) -> None:
    """The same flags pick the same server, identity and namespace in the command's reader
    (kubecoord.cli.kubeapi) as in the backend (kubecoord.backends.kubernetes.load_config):
    the current or a named context, the URL's namespace or the context's, the first path of
    $KUBECONFIG when no --kubeconfig is given."""
    import yaml

    from kubecoord.backends.kubernetes import load_config

    first, second = tmp_path / "first", tmp_path / "second"
    for path, token in ((first, "token-one"), (second, "token-two")):
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "main",
            "clusters": [{"name": "a", "cluster": {"server": f"http://127.0.0.1:1/{path.name}"}},
                         {"name": "b", "cluster": {"server": "http://127.0.0.2:2"}}],
            "users": [{"name": "u", "user": {"token": token}}, {"name": "v", "user": {"token": f"{token}-v"}}],
            "contexts": [{"name": "main", "context": {"cluster": "a", "user": "u", "namespace": "from-main"}},
                         {"name": "second", "context": {"cluster": "b", "user": "v"}}],
        }))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for explicit in (None, str(second)):
        backend = load_config(url_namespace, kubeconfig=explicit, context=context)
        reader = load_credentials(url_namespace, kubeconfig=explicit, context=context)
        assert reader.server == backend.configuration.host
        assert reader.namespace == backend.namespace
        assert reader.source == backend.source
        assert f"Bearer {reader.token}" == backend.configuration.api_key["BearerToken"]
