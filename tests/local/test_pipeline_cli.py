"""`kafkette pipeline`'s arguments (cheap: nothing is started). The verb itself runs what
tests/local/test_spark_autoscale.py proves (`make test-spark-standalone`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.operator.cli.main import build_parser, main


def test_defaults_name_spark_and_the_autoscaler() -> None:
    args = build_parser().parse_args(["pipeline", "--autoscale"])
    assert args.autoscale and args.workers == 2 and args.min_executors == 1 and args.max_executors is None
    assert args.dir == Path(".run/pipeline") and args.bootstrap is None


@pytest.mark.parametrize(
    "bounds",
    [
        ["--min-executors", "3", "--workers", "2"],
        ["--min-executors", "0"],
        ["--max-executors", "3", "--workers", "2"],
        ["--min-executors", "2", "--max-executors", "1"],
    ],
)
def test_executor_bounds_are_checked_before_anything_starts(
    bounds: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pipeline", "--dir", str(tmp_path / "run"), *bounds]) == 1
    assert "--min-executors <= --max-executors <= --workers" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
