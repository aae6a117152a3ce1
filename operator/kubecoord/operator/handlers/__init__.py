"""kopf's entry: importing this package registers the operator's settings, its login and
the controller's start and stop (settings.py), the watch of each kind (kubecoord.operator.kinds)
and the watch of the Group member Leases.

Run them with ``kubecoord operator`` (HA, metrics, health) or, in tests, with
``kopf run --standalone -m kubecoord.operator.handlers``.
"""

from typing import Any

import kopf

from kubecoord.operator.handlers import settings
from kubecoord.operator.handlers._resource import register
from kubecoord.operator.kinds import group, kvstore, leaderelection
from kubecoord.wire import object_names

__all__ = ["settings"]

register("leaderelections", leaderelection.mirror, leaderelection.after_snapshot)
register("groups", group.mirror, group.after_snapshot)
register("kvstores", kvstore.mirror, kvstore.after_snapshot)


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={object_names.GROUP_LABEL: kopf.PRESENT})
def member_lease_event(type: str | None, body: kopf.Body, **_: Any) -> None:
    group.member_lease_event(type, dict(body))
