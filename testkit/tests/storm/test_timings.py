"""The storm's operator Lease timings follow the machine: scaled with the measured write
round trip so that an operator write may take WRITE_HEADROOM round trips
(kubecoord_testkit.storm.runner.scaled_timings)."""

from __future__ import annotations

from kubecoord.operator.fencing import term_write_timeout
from kubecoord_testkit.storm.runner import WRITE_HEADROOM, scaled_timings

QUICK = (6.0, 4.0, 0.5)
"""The storm's own: writes may take 2 s."""


def test_on_a_quick_machine_the_timings_are_as_given() -> None:
    assert scaled_timings(QUICK, 0.02) == QUICK
    assert scaled_timings(QUICK, 2.0 / WRITE_HEADROOM) == QUICK


def test_on_a_loaded_machine_all_three_grow_by_one_factor_until_a_write_may_take_the_headroom() -> None:
    slow = scaled_timings(QUICK, 1.0)
    assert slow == (12.0, 8.0, 1.0)
    assert term_write_timeout(slow[0], slow[1]) >= WRITE_HEADROOM * 1.0
    slower = scaled_timings(QUICK, 3.0)
    assert term_write_timeout(slower[0], slower[1]) >= WRITE_HEADROOM * 3.0 - 0.01
    assert slower[0] / QUICK[0] == slower[1] / QUICK[1] == slower[2] / QUICK[2]
