"""An in-process emulation of the Kubernetes API server (v1.32) for tests.

What belongs here: everything the official ``kubernetes`` client and kopf need from an
API server — storage with resourceVersions, the verbs with their status codes and
Status bodies, watches, discovery, namespaces, CRDs with the status subresource,
finalizers, garbage collection, bearer tokens and RBAC. What does not: controllers
beyond the garbage collector and the namespace/CRD finalizers (no Deployments rolling
out Pods), persistence, TLS, protobuf, aggregated discovery, OpenAPI documents.

Modules, one concern each: ``store`` (objects, resourceVersion, history, watchers),
``registry`` (what each verb does), ``routing`` (HTTP), ``watching`` (watch streams),
``discovery``, ``auth`` (tokens and RBAC), ``collecting`` (garbage collection),
``selectors``, ``patching``, ``strategies`` (per-kind additions), ``validating``
(built-in validation), ``admitting`` (the call site of the custom-resource admission
package, ``admission``: ``admit``, ``field_errors``, ``pruning``, ``schema_validation``,
``cel_rules``), ``status`` (error bodies),
``server`` (``ApiEmulator``), ``cli`` (``kubecoord-testkit emulator``).

Users import ``ApiEmulator`` from here (``kubecoord_testkit.emulator``); the testkit's pytest
plugin serves one per session (``api_emulator``, ``kubeconfig_path``).
"""

from kubecoord_testkit.emulator.requestinfo import RecordedRequest
from kubecoord_testkit.emulator.server import ApiEmulator

__all__ = ["ApiEmulator", "RecordedRequest"]
