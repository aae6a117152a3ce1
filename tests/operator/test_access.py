"""What the operator's readiness asks of the API server (kubecoord.operator.access): the
reads its watches need, and its writes by SelfSubjectAccessReview — asked without a
server here (the real server's answers: tests/operator/test_health_real.py)."""

from __future__ import annotations

from kubecoord.operator import access
from kubecoord.operator.health import HealthState
from kubecoord.operator.kubeapi import ApiException


def test_the_writes_are_asked_in_every_namespace_at_once_or_in_each_watched_one() -> None:
    clusterwide = access.writes((), clusterwide=True)
    assert {review["namespace"] for review in clusterwide} == {""}  # a Role in some namespaces is not enough
    asked = {(r["group"], r["resource"], r.get("subresource", ""), r["verb"]) for r in clusterwide}
    assert {("coordination.k8s.io", "leases", "", "create"), ("", "configmaps", "", "delete"),
            ("rbac.authorization.k8s.io", "rolebindings", "", "patch"), ("", "events", "", "create"),
            ("kubecoord.dev", "groups", "status", "patch"), ("kubecoord.dev", "kvstores", "", "patch")} <= asked
    assert not any(verb == "update" for group, _, _, verb in asked if group == "rbac.authorization.k8s.io")
    namespaced = access.writes(("apps", "jobs"), clusterwide=False)
    assert {review["namespace"] for review in namespaced} == {"apps", "jobs"}
    assert len(namespaced) == 2 * len(clusterwide)


def test_a_refused_write_is_named_and_a_failed_review_is_a_problem() -> None:
    reviews = access.writes(("apps",), clusterwide=False)

    def refusing_deletes(attributes: dict[str, str]) -> object:
        allowed = not (attributes["verb"] == "delete" and attributes["resource"] == "configmaps")
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC policy matched"}}

    problem = str(access.check_writes(reviews, refusing_deletes))
    assert problem == ("refused by the API server (RBAC): may not delete configmaps (core) in namespace apps, "
                       "which its work needs (SelfSubjectAccessReview) (no RBAC policy matched)")
    assert access.check_writes(reviews, lambda attributes: {"status": {"allowed": True}}) is None

    def failing(attributes: dict[str, str]) -> object:
        raise ApiException(status=500, reason="Internal Server Error")

    assert "SelfSubjectAccessReview" in str(access.check_writes(reviews, failing))
    clusterwide = access.writes((), clusterwide=True)
    assert "in every namespace" in str(access.check_writes(clusterwide, lambda attributes: {"status": {}}))


def test_the_writes_are_asked_every_few_rounds_and_every_round_while_not_ready() -> None:
    asked: list[int] = []
    allowed = {"now": False}

    def ask(attributes: dict[str, str]) -> object:
        asked.append(1)
        return {"status": {"allowed": allowed["now"]}}

    state = HealthState()
    monitor = access.AccessMonitor(state, ["/x"], [{"namespace": "", "verb": "create", "group": "",
                                                    "resource": "configmaps"}],
                                   write_every=3, get=lambda path: {}, ask=ask)
    monitor._round()  # the first round asks
    assert len(asked) == 1 and "may not create configmaps" in str(state.access_problem)
    monitor._round()  # not ready: asked again at once
    assert len(asked) == 2
    allowed["now"] = True
    monitor._round()
    assert len(asked) == 3 and state.access_problem is None
    for _ in range(2):  # ready: not asked again before write_every rounds
        monitor._round()
    assert len(asked) == 3
    monitor._round()
    assert len(asked) == 4 and state.access_problem is None


def test_a_refused_read_is_reported_before_the_writes_are_asked() -> None:
    def refusing(path: str) -> object:
        raise ApiException(status=403, reason="Forbidden")

    asked: list[dict[str, str]] = []
    state = HealthState()
    monitor = access.AccessMonitor(state, ["/x"], access.writes(("apps",), clusterwide=False),
                                   get=refusing, ask=lambda attributes: asked.append(attributes) or {})
    monitor._round()
    assert str(state.access_problem).startswith("refused by the API server (RBAC)") and asked == []
