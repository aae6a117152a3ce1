"""The written layout (analytics.layout): tables combined by kind, recovered by type."""

from __future__ import annotations

from typing import Any

import pytest

from kubecoord.analytics import layout


def test_a_table_the_layout_does_not_place_is_refused_not_dropped(spark: Any) -> None:
    frame = spark.range(1)
    with pytest.raises(layout.LayoutError, match="no place in the written layout: surprise"):
        layout.combine({"violations": frame, "surprise": frame})


def test_members_whose_shared_column_differs_in_type_are_refused(spark: Any) -> None:
    gaps = spark.range(1).selectExpr("'a' AS name", "1.5 AS gap")
    rebalances = spark.range(1).selectExpr("'a' AS name", "'slow' AS gap")
    with pytest.raises(layout.LayoutError, match="column 'gap' is"):
        layout.combine({"failover_gaps": gaps, "rebalances": rebalances})


def test_rows_come_back_by_type_with_their_own_columns_and_nulls_kept(spark: Any, tmp_path: Any) -> None:
    gaps = spark.createDataFrame([("e", None), ("f", 2.0)], "name string, gap double")
    seq = spark.createDataFrame([("p", 7)], "process string, missing bigint")
    malformed = spark.createDataFrame([], "file string, line bigint")
    written = layout.combine({"failover_gaps": gaps, "seq_gaps": seq, "malformed_lines": malformed})
    assert sorted(written) == ["input_problems", "intervals"]
    for name, frame in written.items():
        frame.write.parquet(str(tmp_path / "tables" / name))

    back = layout.read(spark, str(tmp_path / "tables"))
    assert sorted(back) == ["failover_gaps", "malformed_lines", "seq_gaps"]
    assert back["failover_gaps"].columns == ["name", "gap"]
    assert sorted(map(tuple, back["failover_gaps"].collect())) == [("e", None), ("f", 2.0)]
    assert [tuple(r) for r in back["seq_gaps"].collect()] == [("p", 7)]
    assert back["seq_gaps"].schema["missing"].dataType.simpleString() == "bigint"
    assert back["malformed_lines"].columns == ["file", "line"] and back["malformed_lines"].count() == 0
