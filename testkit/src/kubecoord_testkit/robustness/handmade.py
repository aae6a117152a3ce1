"""Hand-made history entries, in the recorded form the checker reads: what the tests of the
checker, of the event-log converter and of the tier build their known-good and known-bad
histories from (a lost update, two overlapping holders, a token going back, ...), and
``inject``, which puts such violations into a copy of a recorded history.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from itertools import pairwise
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


@dataclass(frozen=True)
class Injected:
    """A recorded history with three violations injected, and where they are."""

    history: dict[str, Any] = field(repr=False)
    lost_update: str
    """The key with a second acknowledgement of one update's version."""
    overlap: str
    """The lock (one holder) whose holder claimed it past its successor's acquire."""
    token_back: str
    """The semaphore one of whose holders took a token below one it had held on that slot."""


def inject(history: dict[str, Any], *, lock: str = "robust-lock", semaphore: str = "robust-sem") -> Injected:
    """A copy of a recorded history (recording.merge's form) with one lost update, two
    overlapping holders and a token going back, each placed where no other operation can
    explain it, so that every correct judge must flag it:

    - lost update: an acknowledged update (unfenced) answered again, same interval and
      version, to a new client — on a key with no write of unknown outcome called before
      the update returned and no other write overlapping it (no linearization lets the
      version repeat);
    - overlap: a hold of ``lock`` whose holder's last claim moves into the next hold's
      claim (another holder's, acquired after it);
    - token back: of two holds of one slot of ``semaphore`` by one holder, the later takes
      the earlier's token - 1.

    Raises ValueError when the history has no place for one of them."""
    copy = deepcopy(history)
    return Injected(copy, _lost_update(copy), _overlap(copy, lock), _token_back(copy, semaphore))


def _lost_update(history: dict[str, Any]) -> str:
    ops = history["kv"]
    writes = [op for op in ops if op["input"]["op"] != "get"]

    def alone(update: dict[str, Any]) -> bool:
        key = update["input"]["key"]
        for op in writes:
            if op is update or op["input"]["key"] != key:
                continue
            if op["return"] is None and op["call"] < update["return"]:
                return False  # may take effect anywhere after its call
            if op["return"] is not None and op["call"] < update["return"] and op["return"] > update["call"]:
                return False
        return True

    candidates = [op for op in writes if op["input"]["op"] == "update" and "fence" not in op["input"]
                  and op["return"] is not None and (op["output"] or {}).get("status") == "ok" and alone(op)]
    if not candidates:
        raise ValueError("no acknowledged update stands alone on its key: nowhere to inject a lost update")
    update = candidates[len(candidates) // 2]
    twin = deepcopy(update)
    twin["client"] = 1 + max(op["client"] for op in ops + history["locks"])
    twin["input"]["value"] = f"{update['input']['value']}-lost"
    ops.append(twin)
    return str(update["input"]["key"])


def _holds(history: dict[str, Any], lock: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The holds of ``lock`` (acquire, end), by acquire's return."""
    locks = history["locks"]
    pairs = [(acquire, end) for acquire, end in zip(locks[::2], locks[1::2], strict=True)
             if acquire["input"]["lock"] == lock]
    return sorted(pairs, key=lambda pair: pair[0]["return"])


def _overlap(history: dict[str, Any], lock: str) -> str:
    holds = [pair for pair in _holds(history, lock) if pair[0]["input"]["max_holders"] == 1]
    for (_, end), (after, after_end) in pairwise(holds):
        if after["input"]["holder"] == end["input"]["holder"] or after_end["call"] <= after["return"]:
            continue
        claimed = (after["return"] + after_end["call"]) / 2  # inside the successor's claim
        end["call"] = claimed
        if end["return"] is not None:
            end["return"] = max(end["return"], claimed)
        return lock
    raise ValueError(f"no two holds of {lock} by different holders: nowhere to inject an overlap")


def _token_back(history: dict[str, Any], semaphore: str) -> str:
    # One holder's two holds of one slot: a process's own events bound no clock offset, so
    # the pipeline's clock estimation (clocks: an epoch's acquisition before the next
    # epoch's) takes no false evidence from the token put back.
    holds = _holds(history, semaphore)
    for first, _ in holds:
        later = [acquire for acquire, _ in holds if acquire["input"]["holder"] == first["input"]["holder"]
                 and acquire["input"]["slot"] == first["input"]["slot"] and acquire["call"] > first["return"]]
        if later and first["input"]["token"] > 1:
            later[0]["input"]["token"] = first["input"]["token"] - 1
            return semaphore
    raise ValueError(f"no holder of {semaphore} held one slot twice: nowhere to inject a token going back")
