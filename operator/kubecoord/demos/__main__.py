"""``python -m kubecoord.demos``: the same as ``kubecoord demo``."""

from kubecoord.demos.cli import main

raise SystemExit(main())
