"""Discovery documents (/api, /api/v1, /apis, /apis/GROUP, /apis/GROUP/VERSION, /version).

Legacy (non-aggregated) discovery only: clients that ask for aggregated discovery
(kubectl 1.32) get the legacy documents as application/json and fall back to them.
A CRD's resources appear as soon as the CRD is stored (it is Established at once) and
disappear when it is gone.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubecoord_testkit.emulator.resources import ResourceType

JSON = dict[str, Any]
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-kubecoord-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def core_versions(server_address: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> JSON:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _groups(types: list[ResourceType]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rtype in types:
        if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
            groups[rtype.group].append(rtype.version)
    return groups


def group_list(types: list[ResourceType]) -> JSON:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in sorted(_groups(types).items())],
    }


def group(types: list[ResourceType], name: str) -> JSON | None:
    versions = _groups(types).get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def resource_list(types: list[ResourceType], group_name: str, version: str) -> JSON | None:
    selected = [t for t in types if t.group == group_name and t.version == version]
    if not selected:
        return None
    resources = []
    for rtype in sorted(selected, key=lambda t: t.plural):
        entry: JSON = {
            "name": rtype.plural,
            "singularName": rtype.singular,
            "namespaced": rtype.namespaced,
            "kind": rtype.kind,
            "verbs": list(rtype.verbs),
            "storageVersionHash": hashlib.sha256(f"{rtype.group}/{rtype.version}/{rtype.kind}".encode()).hexdigest()[
                :11
            ],
        }
        if rtype.short_names:
            entry["shortNames"] = list(rtype.short_names)
        if rtype.categories:
            entry["categories"] = list(rtype.categories)
        resources.append(entry)
        for sub in rtype.subresources:
            resources.append(
                {
                    "name": f"{rtype.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rtype.namespaced,
                    "kind": "Scale" if sub == "scale" else rtype.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group_name}/{version}" if group_name else version,
        "resources": resources,
    }
