"""The contract harness for kubernetes://: coordinators on the session's API emulator.

Short timings (lease 4 s, renew deadline 3 s, retry 1 s) so expiry takes seconds;
every test uses fresh object names (the ``name`` fixture), so tests share one emulator
and its ``default`` namespace without colliding. crash() is the coordinator's
simulate_crash() test hook: it stops renewing and watching without releasing anything.
"""

from __future__ import annotations

import pathlib
import time

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubecoord.wire import object_names

from .harness import UrlHarness

# Short enough that expiry takes seconds, long enough that a leader on a loaded 2-core
# machine (other suites running) still renews within its deadline: three tries per term.
LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 1.0


class KubernetesHarness(UrlHarness):
    name = "kubernetes"
    settle = 15.0

    def __init__(self, kubeconfig: pathlib.Path, namespace: str = "default") -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        super().__init__(
            f"kubernetes://{namespace}",
            kubeconfig=str(kubeconfig),
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
        )

    def delete_store(self, name: str) -> None:
        # Every shard ConfigMap of the store (shard 0 is kubecoord-kv.NAME, the others NAME.I).
        base = object_names.store_shard_name(name, 0)
        with k8s_config.new_client_from_config(config_file=str(self.kubeconfig)) as api:  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
            core = k8s.CoreV1Api(api)
            for configmap in core.list_namespaced_config_map(self.namespace).items:
                assert configmap.metadata is not None and configmap.metadata.name is not None  # a listed object
                if configmap.metadata.name == base or configmap.metadata.name.startswith(f"{base}."):
                    core.delete_namespaced_config_map(configmap.metadata.name, self.namespace)

    def expire(self) -> None:
        # Followers count the lease from when they last saw it change: wait it out.
        time.sleep(LEASE_DURATION + 0.5)
