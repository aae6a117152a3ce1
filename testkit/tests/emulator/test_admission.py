"""CRD admission (kubecoord_testkit.emulator.admission) on sample CRDs: pruning, defaulting,
schema validation and CEL rules, with the API server's messages and field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecoord_testkit.emulator.admission import Invalid, admit

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [
        {
            "rule": "self.renewDeadlineSeconds < self.leaseDurationSeconds",
            "message": "renewDeadlineSeconds must be less than leaseDurationSeconds",
            "fieldPath": ".renewDeadlineSeconds",
        },
        {
            "rule": "self.backend == 'zookeeper' ? has(self.zookeeper) : !has(self.zookeeper)",
            "message": "spec.zookeeper is required when spec.backend is zookeeper and forbidden otherwise",
            "fieldPath": ".zookeeper",
            "reason": "FieldValueRequired",
        },
    ],
    "required": ["backend"],
    "properties": {
        "backend": {
            "type": "string",
            "enum": ["kubernetes", "zookeeper"],
            "default": "kubernetes",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "backend is immutable"}],
        },
        "zookeeper": {
            "type": "object",
            "required": ["hosts"],
            "properties": {
                "hosts": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 3,
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "string", "pattern": "^[a-z0-9.-]+:[0-9]{1,5}$"},
                },
                "chroot": {"type": "string", "default": "/kubecoord", "maxLength": 16, "minLength": 2},
                "session": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "timeoutSeconds": {"type": "number", "default": 10, "exclusiveMinimum": True, "minimum": 0}
                    },
                },
            },
        },
        "leaseDurationSeconds": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 15},
        "renewDeadlineSeconds": {"type": "number", "minimum": 0.05, "default": 10},
        "sizeLimit": {"type": "integer", "minimum": 0, "multipleOf": 2},
        "owner": {
            "type": "string",
            "x-kubernetes-validations": [
                {"rule": "self.lowerAscii() == self", "messageExpression": "'owner ' + self + ' must be lower case'"}
            ],
        },
        "expires": {"type": "string", "format": "date-time"},
        "every": {
            "type": "string",
            "format": "duration",
            "x-kubernetes-validations": [{"rule": "self >= duration('1s')", "message": "every must be at least 1s"}],
        },
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 5}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "port": {"x-kubernetes-int-or-string": True},
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "since": {
                        "type": "integer",
                        "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "since may only grow"}],
                    },
                },
            },
        },
        "tags": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-validations": [
                {"rule": "self.all(t, t.startsWith('t-'))", "message": "tags start with t-"},
                {"rule": "self.join(',').size() <= 20", "message": "tags too long"},
            ],
        },
    },
}

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "samples.kubecoord.dev"},
    "spec": {
        "group": "kubecoord.dev",
        "scope": "Namespaced",
        "names": {"kind": "Sample", "plural": "samples", "singular": "sample", "listKind": "SampleList"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "x-kubernetes-validations": [
                            {"rule": "size(self.metadata.name) <= 20", "message": "name at most 20 characters"}
                        ],
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "spec": SPEC_SCHEMA,
                            "status": {"type": "object", "properties": {"leader": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


def sample(spec: dict[str, Any] | None = None, name: str = "billing", **top: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "kubecoord.dev/v1alpha1",
        "kind": "Sample",
        "metadata": {"name": name, "namespace": "default", "labels": {"a": "b"}},
        "spec": {} if spec is None else spec,
    }
    body.update(top)
    return body


def rejected(obj: dict[str, Any], old: dict[str, Any] | None = None, subresource: str | None = None) -> dict[str, Any]:
    with pytest.raises(Invalid) as caught:
        admit(CRD, obj, old, subresource)
    status = caught.value.status
    assert status["code"] == 422 and status["reason"] == "Invalid" and status["kind"] == "Status"
    assert status["details"]["kind"] == "Sample" and status["details"]["group"] == "kubecoord.dev"
    assert str(caught.value) == status["message"]
    return status


def causes(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]]


# --- defaulting and pruning ----------------------------------------------------------


def test_defaults_are_filled_in_recursively() -> None:
    stored = admit(CRD, sample({"backend": "zookeeper", "zookeeper": {"hosts": ["zk:2181"]}}), None, None)
    assert stored["spec"] == {
        "backend": "zookeeper",
        "zookeeper": {"hosts": ["zk:2181"], "chroot": "/kubecoord", "session": {"timeoutSeconds": 10}},
        "leaseDurationSeconds": 15,
        "renewDeadlineSeconds": 10,
    }


def test_an_empty_spec_gets_its_defaults_and_required_defaults_satisfy_required() -> None:
    assert admit(CRD, sample(), None, None)["spec"] == {
        "backend": "kubernetes",
        "leaseDurationSeconds": 15,
        "renewDeadlineSeconds": 10,
    }


def test_non_nullable_null_is_defaulted_or_dropped() -> None:
    stored = admit(CRD, sample({"leaseDurationSeconds": None, "owner": None}), None, None)
    assert stored["spec"]["leaseDurationSeconds"] == 15
    assert "owner" not in stored["spec"]


def test_unknown_fields_are_pruned_but_metadata_and_preserved_fields_stay() -> None:
    obj = sample({"bogus": 1, "extra": {"anything": {"goes": [1]}}, "zookeeper": None})
    obj["unknownTop"] = True
    obj["metadata"]["annotations"] = {"x": "y"}
    stored = admit(CRD, obj, None, None)
    assert "unknownTop" not in stored and "bogus" not in stored["spec"]
    assert stored["spec"]["extra"] == {"anything": {"goes": [1]}}
    assert stored["metadata"] == {
        "name": "billing",
        "namespace": "default",
        "labels": {"a": "b"},
        "annotations": {"x": "y"},
    }


def test_the_input_is_not_modified() -> None:
    obj = sample({"bogus": 1})
    before = copy.deepcopy(obj)
    admit(CRD, obj, None, None)
    assert obj == before


def test_status_is_dropped_on_create_and_kept_from_old_on_update() -> None:
    created = admit(CRD, sample(status={"leader": "pod-a"}), None, None)
    assert "status" not in created
    old = {**created, "status": {"leader": "pod-a"}}
    updated = admit(CRD, {**created, "status": {"leader": "forged"}}, old, None)
    assert updated["status"] == {"leader": "pod-a"}


def test_a_status_update_changes_only_the_status() -> None:
    old = admit(CRD, sample(), None, None)
    old["metadata"]["resourceVersion"] = "5"
    changed = copy.deepcopy(old)
    changed["spec"]["leaseDurationSeconds"] = 99
    changed["status"] = {"leader": "pod-b"}
    stored = admit(CRD, changed, old, "status")
    assert stored["spec"]["leaseDurationSeconds"] == 15
    assert stored["status"] == {"leader": "pod-b"}


# --- structural schema ---------------------------------------------------------------


def test_required_field() -> None:
    obj = sample()
    del obj["spec"]
    status = rejected(obj)
    assert status["message"] == 'Sample.kubecoord.dev "billing" is invalid: spec: Required value'
    assert causes(status) == [("spec", "FieldValueRequired", "Required value")]


def test_enum() -> None:
    status = rejected(sample({"backend": "etcd"}))
    assert causes(status) == [
        (
            "spec.backend",
            "FieldValueNotSupported",
            'Unsupported value: "etcd": supported values: "kubernetes", "zookeeper"',
        )
    ]


def test_type_mismatch_is_reported_and_blocks_the_rules() -> None:
    status = rejected(sample({"leaseDurationSeconds": "15s"}))
    assert causes(status)[0] == (
        "spec.leaseDurationSeconds",
        "FieldValueTypeInvalid",
        'Invalid value: "string": spec.leaseDurationSeconds in body must be of type integer: "string"',
    )
    assert "some validation rules were not checked" in status["message"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"leaseDurationSeconds": 0},
            "spec.leaseDurationSeconds",
            "Invalid value: 0: spec.leaseDurationSeconds in body should be greater than or equal to 1",
        ),
        (
            {"leaseDurationSeconds": 4000},
            "spec.leaseDurationSeconds",
            "Invalid value: 4000: spec.leaseDurationSeconds in body should be less than or equal to 3600",
        ),
        (
            {"sizeLimit": -2},
            "spec.sizeLimit",
            "Invalid value: -2: spec.sizeLimit in body should be greater than or equal to 0",
        ),
        ({"sizeLimit": 3}, "spec.sizeLimit", "Invalid value: 3: spec.sizeLimit in body should be a multiple of 2"),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["zk:2181"], "session": {"timeoutSeconds": 0}}},
            "spec.zookeeper.session.timeoutSeconds",
            "Invalid value: 0: spec.zookeeper.session.timeoutSeconds in body should be greater than 0",
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["ZK"]}},
            "spec.zookeeper.hosts[0]",
            """Invalid value: "ZK": spec.zookeeper.hosts[0] in body should match '^[a-z0-9.-]+:[0-9]{1,5}$'""",
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["a:1"], "chroot": "/a-very-long-chroot-path"}},
            "spec.zookeeper.chroot",
            "Too long: may not be longer than 16",
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["a:1"], "chroot": "/"}},
            "spec.zookeeper.chroot",
            'Invalid value: "/": spec.zookeeper.chroot in body should be at least 2 chars long',
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": []}},
            "spec.zookeeper.hosts",
            "Invalid value: []: spec.zookeeper.hosts in body should have at least 1 items",
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["a:1", "b:1", "c:1", "d:1"]}},
            "spec.zookeeper.hosts",
            "Too many: 4: must have at most 3 items",
        ),
        (
            {"backend": "zookeeper", "zookeeper": {"hosts": ["a:1", "a:1"]}},
            "spec.zookeeper.hosts[1]",
            'Duplicate value: "a:1"',
        ),
        (
            {"expires": "tomorrow"},
            "spec.expires",
            'Invalid value: "tomorrow": spec.expires in body must be of type date-time: "tomorrow"',
        ),
        ({"labels": {"k": "toolong"}}, "spec.labels[k]", "Too long: may not be longer than 5"),
        ({"port": 1.5}, "spec.port", 'Invalid value: "number": spec.port in body must be of type int-or-string'),
    ],
)
def test_value_validations(spec: dict[str, Any], field: str, message: str) -> None:
    status = rejected(sample(spec))
    assert (field, message) in [(f, m) for f, _, m in causes(status)], causes(status)
    assert f"{field}: {message}" in status["message"]


def test_valid_formats_and_int_or_string_pass() -> None:
    for spec in ({"expires": "2026-11-22T22:00:00Z", "port": 80}, {"port": "http", "every": "1m30s"}):
        admit(CRD, sample(spec), None, None)


def test_metadata_name_must_be_a_dns_subdomain() -> None:
    status = rejected(sample(name="Bad_Name"))
    assert causes(status)[0][:2] == ("metadata.name", "FieldValueInvalid")
    assert "a lowercase RFC 1123 subdomain" in status["message"]


def test_several_errors_are_bracketed_in_the_message() -> None:
    status = rejected(sample({"leaseDurationSeconds": 0, "backend": "etcd"}))
    assert status["message"].startswith('Sample.kubecoord.dev "billing" is invalid: [')
    assert len(status["details"]["causes"]) >= 2


# --- CEL rules -----------------------------------------------------------------------


def test_cross_field_rule_names_its_field_path_and_mixes_int_and_double() -> None:
    status = rejected(sample({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 20}))
    assert status["message"] == (
        'Sample.kubecoord.dev "billing" is invalid: spec.renewDeadlineSeconds: Invalid value: "object": '
        "renewDeadlineSeconds must be less than leaseDurationSeconds"
    )
    assert causes(status) == [
        (
            "spec.renewDeadlineSeconds",
            "FieldValueInvalid",
            'Invalid value: "object": renewDeadlineSeconds must be less than leaseDurationSeconds',
        )
    ]
    admit(CRD, sample({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 14.5}), None, None)


def test_has_and_reason_required() -> None:
    status = rejected(sample({"backend": "zookeeper"}))
    assert causes(status) == [
        (
            "spec.zookeeper",
            "FieldValueRequired",
            "Required value: spec.zookeeper is required when spec.backend is zookeeper and forbidden otherwise",
        )
    ]


def test_transition_rule_applies_only_on_update() -> None:
    old = admit(CRD, sample({"backend": "kubernetes"}), None, None)
    admit(CRD, old, old, None)  # unchanged: fine
    changed = copy.deepcopy(old)
    changed["spec"]["backend"] = "zookeeper"
    changed["spec"]["zookeeper"] = {"hosts": ["zk:2181"]}
    status = rejected(changed, old)
    assert causes(status) == [("spec.backend", "FieldValueInvalid", 'Invalid value: "string": backend is immutable')]


def test_transition_rule_on_list_map_items_correlates_by_key() -> None:
    old = admit(CRD, sample({"conditions": [{"type": "Ready", "since": 5}]}), None, None)
    grown = sample({"conditions": [{"type": "New", "since": 1}, {"type": "Ready", "since": 6}]})
    admit(CRD, grown, old, None)
    shrunk = sample({"conditions": [{"type": "Ready", "since": 4}]})
    status = rejected(shrunk, old)
    assert causes(status) == [
        ("spec.conditions[0].since", "FieldValueInvalid", 'Invalid value: "integer": since may only grow')
    ]


def test_message_expression_and_string_library() -> None:
    status = rejected(sample({"owner": "Alice"}))
    assert causes(status) == [
        ("spec.owner", "FieldValueInvalid", 'Invalid value: "string": owner Alice must be lower case')
    ]
    admit(CRD, sample({"owner": "alice"}), None, None)


def test_macros_join_and_size() -> None:
    admit(CRD, sample({"tags": ["t-a", "t-b"]}), None, None)
    assert causes(rejected(sample({"tags": ["t-a", "b"]})))[0][2] == 'Invalid value: "array": tags start with t-'
    assert (
        causes(rejected(sample({"tags": ["t-aaaaaaaa", "t-bbbbbbbbbbbb"]})))[0][2]
        == 'Invalid value: "array": tags too long'
    )


def test_duration_format_is_a_cel_duration() -> None:
    status = rejected(sample({"every": "500ms"}))
    assert causes(status) == [("spec.every", "FieldValueInvalid", 'Invalid value: "string": every must be at least 1s')]


def test_root_rule_sees_metadata_name() -> None:
    status = rejected(sample(name="a-name-much-longer-than-twenty"))
    assert causes(status) == [("", "FieldValueInvalid", 'Invalid value: "object": name at most 20 characters')]
    assert status["message"].endswith('is invalid: <nil>: Invalid value: "object": name at most 20 characters')


def test_runtime_error_and_compile_error_are_reported_on_the_rule_path() -> None:
    crd = copy.deepcopy(CRD)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["x-kubernetes-validations"] = [
        {"rule": "self.owner == 'x'"},
        {"rule": "self.owner ==", "message": "broken"},
    ]
    with pytest.raises(Invalid) as caught:
        admit(crd, sample(), None, None)
    messages = [c["message"] for c in caught.value.status["details"]["causes"]]
    assert messages[0] == "Invalid value: \"object\": no such key: owner evaluating rule: self.owner == 'x'"
    assert messages[1].startswith('Invalid value: "object": rule compile error')


def test_a_rule_without_message_reports_the_rule() -> None:
    crd = copy.deepcopy(CRD)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["x-kubernetes-validations"] = [{"rule": "self.leaseDurationSeconds > 100"}]
    with pytest.raises(Invalid) as caught:
        admit(crd, sample(), None, None)
    status = caught.value.status
    assert causes(status) == [
        ("spec", "FieldValueInvalid", 'Invalid value: "object": failed rule: self.leaseDurationSeconds > 100')
    ]


def test_an_unknown_version_is_not_enforced() -> None:
    obj = sample({"leaseDurationSeconds": "x"})
    obj["apiVersion"] = "kubecoord.dev/v9"
    assert admit(CRD, obj, None, None) == obj


def test_property_names_are_escaped_as_kubernetes_does() -> None:
    crd = copy.deepcopy(CRD)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["max-size"] = {"type": "integer"}
    spec_schema["properties"]["namespace"] = {"type": "string"}
    spec_schema["x-kubernetes-validations"] = [
        {"rule": "!has(self.max__dash__size) || self.max__dash__size < 10", "message": "max-size below 10"},
        {"rule": "!has(self.__namespace__) || self.__namespace__ != 'kube-system'", "message": "not kube-system"},
    ]
    admit(crd, sample({"max-size": 3, "namespace": "apps"}), None, None)
    with pytest.raises(Invalid) as caught:
        admit(crd, sample({"max-size": 30, "namespace": "kube-system"}), None, None)
    assert [c["message"] for c in caught.value.status["details"]["causes"]] == [
        'Invalid value: "object": max-size below 10',
        'Invalid value: "object": not kube-system',
    ]


def test_remembered_rule_results_follow_the_values_the_rule_reads() -> None:
    """Rule results are reused between admissions; only the fields a rule reads count."""
    bad = sample({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 20})
    first = rejected(bad)
    assert rejected(copy.deepcopy(bad)) == first  # a remembered failure still fails, identically
    unrelated_change = sample({"leaseDurationSeconds": 15, "renewDeadlineSeconds": 20, "owner": "bob"})
    assert causes(rejected(unrelated_change)) == causes(first)
    admit(CRD, sample({"leaseDurationSeconds": 25, "renewDeadlineSeconds": 20}), None, None)
    # the same expression on nodes of different types is judged on each node's own type
    crd = copy.deepcopy(CRD)
    properties = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    properties["ratio"] = {"type": "number", "x-kubernetes-validations": [{"rule": "type(self) == double"}]}
    properties["count"] = {"type": "integer", "x-kubernetes-validations": [{"rule": "type(self) == double"}]}
    with pytest.raises(Invalid) as caught:
        admit(crd, sample({"ratio": 2, "count": 2}), None, None)
    assert [c["field"] for c in caught.value.status["details"]["causes"]] == ["spec.count"]
