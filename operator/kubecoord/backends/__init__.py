"""Backends: one module (or subpackage) per URL scheme, found through entry points.

A backend implements kubecoord.api for one coordination service. Backends never import
each other; a backend's third-party dependency (kazoo, kubernetes) is imported only in
its own package, and only when its scheme is used.
"""
