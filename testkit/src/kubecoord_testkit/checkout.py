"""Where the repository's own files are (``crds/``, ``examples/``), for the soak and the
demos, which install the CRDs and apply the examples as a user would.

The CRDs' single source is ``crds/`` at the top of the repository (the chart and the
tests read it there too), so the testkit does not ship copies. The checkout is found as:
``$KUBECOORD_PROJECT_ROOT``; else the checkout this package sits in (an editable
install, as ``make install`` makes); else the current directory or one of its parents.
Guaranteed: the folder returned holds ``crds/``. Not guaranteed: that it is the same
version as the installed kubecoord (a non-editable testkit run from another checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_ROOT = "KUBECOORD_PROJECT_ROOT"


class CheckoutNotFound(RuntimeError):
    """No folder with the repository's crds/ was found (the message says where we looked)."""


def project_root() -> Path:
    """The repository checkout holding ``crds/`` and ``examples/``; CheckoutNotFound otherwise."""
    override = os.environ.get(ENV_ROOT)
    if override:
        root = Path(override).expanduser()
        if not (root / "crds").is_dir():
            raise CheckoutNotFound(f"${ENV_ROOT}={override} has no crds/ folder")
        return root
    here = Path(__file__).resolve()
    cwd = Path.cwd().resolve()
    candidates = [here.parents[3], cwd, *cwd.parents]  # testkit/src/kubecoord_testkit/checkout.py
    for candidate in candidates:
        if (candidate / "crds").is_dir() and (candidate / "testkit").is_dir():
            return candidate
    raise CheckoutNotFound(
        f"no kubecoord checkout (a folder with crds/ and testkit/) at {candidates[0]}, {cwd} or its parents: "
        f"run from a checkout or set ${ENV_ROOT}"
    )
