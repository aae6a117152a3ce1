"""Safety checks over Worker reports: who held which unit when, across members.

- no unit is held by two members at overlapping times (a killed member's holdings end
  when it was killed: a dead process does no work);
- every work tick falls inside the ticking member's own holding of each unit;
- each member's assigned generations strictly increase, and ticks never go back.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any


def violations(reports: list[dict[str, Any]], killed: dict[str, float]) -> list[str]:
    found: list[str] = []
    by_member: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in reports:
        if "member" in line and "t" in line:
            by_member[line["member"]].append(line)
    holdings: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for member, lines in by_member.items():
        lines.sort(key=lambda line: line["t"])
        start: dict[str, float] = {}
        intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
        last_gen = -1
        last_tick_gen = -1
        for line in lines:
            if line["e"] == "assigned":
                if line["gen"] <= last_gen:
                    found.append(f"{member}: generation {line['gen']} assigned after {last_gen}")
                last_gen = line["gen"]
                for unit in line["units"]:
                    if unit in start:
                        found.append(f"{member}: {unit} assigned twice without a revocation")
                    start[unit] = line["t"]
            elif line["e"] == "revoked":
                for unit in line["units"]:
                    if unit in start:
                        intervals[unit].append((start.pop(unit), line["t"]))
            elif line["e"] == "work":
                if line["gen"] < last_tick_gen:
                    found.append(f"{member}: work on generation {line['gen']} after {last_tick_gen}")
                last_tick_gen = line["gen"]
                for unit in line["units"]:
                    if unit not in start:
                        found.append(f"{member}: work on {unit} it does not hold at {line['t']:.3f}")
        end = killed.get(member, math.inf)
        for unit, began in start.items():
            intervals[unit].append((began, end))
        for unit, own_spans in intervals.items():
            holdings[unit].extend((a, b, member) for a, b in own_spans)
    for unit, spans in holdings.items():
        spans.sort()
        latest_end, latest_member = -math.inf, ""
        for began, ended, member in spans:
            if member != latest_member and began < latest_end:
                found.append(f"{unit}: held by {latest_member} until {latest_end:.3f} and by {member} from {began:.3f}")
            if ended > latest_end:
                latest_end, latest_member = ended, member
    return found


def holders(reports: list[dict[str, Any]], killed: dict[str, float]) -> dict[str, str]:
    """unit -> the member holding it at the end (killed members hold nothing)."""
    owner: dict[str, str] = {}
    for line in sorted(reports, key=lambda line: line.get("t", 0.0)):
        if line.get("member") in killed:
            continue
        if line.get("e") == "assigned":
            owner.update(dict.fromkeys(line["units"], line["member"]))
        elif line.get("e") == "revoked":
            for unit in line["units"]:
                if owner.get(unit) == line["member"]:
                    del owner[unit]
    return owner


def stray_work(reports: list[dict[str, Any]], member: str, killed: dict[str, float]) -> list[str]:
    """Work ticks of ``member`` on a unit while another member held it (a fenced member
    that kept working)."""
    others = [line for line in reports if line.get("member") != member and "t" in line]
    spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    start: dict[tuple[str, str], float] = {}
    for line in sorted(others, key=lambda line: line["t"]):
        for unit in line.get("units", ()):
            key = (line["member"], unit)
            if line["e"] == "assigned":
                start[key] = line["t"]
            elif line["e"] == "revoked" and key in start:
                spans[unit].append((start.pop(key), line["t"], line["member"]))
    for (holder, unit), began in start.items():
        spans[unit].append((began, killed.get(holder, math.inf), holder))
    found = []
    for line in reports:
        if line.get("member") == member and line.get("e") == "work":
            for unit in line["units"]:
                for began, ended, holder in spans.get(unit, ()):
                    if began <= line["t"] <= ended:
                        found.append(f"{member} worked on {unit} at {line['t']:.3f} while {holder} held it")
    return found
