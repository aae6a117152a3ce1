"""kopf handlers, one module per CRD; importing this package registers them all.

Run them with ``kubecoord operator`` (HA, metrics, health) or, in tests, with
``kopf run --standalone -m kubecoord.operator.handlers``.
"""

from kubecoord.operator.handlers import group, kvstore, leaderelection, settings

__all__ = ["group", "kvstore", "leaderelection", "settings"]
