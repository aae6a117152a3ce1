"""The ``kubecoord`` command. Each subcommand lives in the module that owns its concern;
this module only wires them to argparse.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kubecoord._internal import logs

# name -> (module, help). The module provides add_arguments(parser) and run(args) -> int.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("kubecoord.demos.cli", "run the demo scenario"),
    "emulator": ("kubecoord.testing.emulator.cli", "run the Kubernetes API emulator in the foreground"),
    "operator": ("kubecoord.operator.cli", "run the operator (kopf) for the kubecoord.dev CRDs"),
    "analyze": ("kubecoord.analytics.cli", "analyze coordination event logs with PySpark; exit 3 on safety violations"),
    "generate-history": ("kubecoord.analytics.generate", "write synthetic coordination event logs"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubecoord", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING (default), ERROR")
    parser.add_argument("--log-format", choices=["json", "text"], default="json", help="default: %(default)s")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    return int(args._run(args))


if __name__ == "__main__":
    sys.exit(main())
