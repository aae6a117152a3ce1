"""``python -m kubecoord_testkit.demos``: the same as ``kubecoord-testkit demo``."""

from kubecoord_testkit.demos.cli import main

raise SystemExit(main())
