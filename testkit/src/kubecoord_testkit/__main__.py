"""``python -m kubecoord_testkit``: the same as the ``kubecoord-testkit`` command."""

from kubecoord_testkit.cli import main

raise SystemExit(main())
