"""Hand-made history entries, in the recorded form the checker reads: what the tests of the
checker, of the event-log converter and of the tier build their known-good and known-bad
histories from (a lost update, two overlapping holders, a token going back, ...)."""

from __future__ import annotations

from typing import Any


def kv(client: int, call: float, ret: float | None, op: str, key: str = "k", *, value: str = "",
       expected: int | None = None, status: str = "ok", read: str = "", version: int = 0,
       fence: int | None = None) -> dict[str, Any]:
    """One KV operation of ``client`` called at ``call`` and answered at ``ret`` (None: the
    outcome is unknown, as after a cut connection), answered ``status`` with ``read`` and
    ``version``."""
    operation: dict[str, Any] = {"op": op, "key": key}
    if value:
        operation["value"] = value
    if expected is not None:
        operation["expected_version"] = expected
    if fence is not None:
        operation.update(fence=fence, domain="l")
    output = None if ret is None else {"status": status, "value": read, "version": version}
    return {"client": client, "call": call, "return": ret, "input": operation, "output": output}


def hold(client: int, holder: str, acquired: tuple[float, float], ended: tuple[float, float | None], *,
         token: int, lock: str = "l", slots: int = 1, slot: int = 0) -> list[dict[str, Any]]:
    """One hold of ``lock`` by ``holder`` with fencing ``token``: its acquire (call, return)
    and its end (call, return; a return of None: the end's outcome is unknown)."""
    common = {"lock": lock, "max_holders": slots, "holder": holder, "slot": slot}
    end_known = ended[1] is not None
    return [
        {"client": client, "call": acquired[0], "return": acquired[1],
         "input": {"op": "acquire", "token": token, **common}, "output": {"status": "ok"}},
        {"client": client, "call": ended[0], "return": ended[1], "input": {"op": "end", **common},
         "output": {"status": "ok"} if end_known else None},
    ]
