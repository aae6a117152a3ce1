"""``python -m kubecoord.cli`` is the ``kubecoord`` command."""

import sys

from kubecoord.cli import main

sys.exit(main())
