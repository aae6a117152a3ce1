"""``python -m kubecoord.analytics`` or ``spark-submit .../kubecoord/analytics/__main__.py``:
the analyze command without the kubecoord entry point."""

from __future__ import annotations

import argparse
import sys

from kubecoord.analytics import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubecoord analyze", description=cli.__doc__.splitlines()[0])
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
