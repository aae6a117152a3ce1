"""Test certificates: a CA and the server and client certificates it signs, made with the
``openssl`` command in one folder (``NAME.key``, ``NAME.crt``; the CA is ``ca.key``,
``ca.crt``). Every server certificate names 127.0.0.1 and localhost.

Status: test support. Not for production: the keys are unencrypted and the CA's key sits
beside them.
"""

from __future__ import annotations

import pathlib
import subprocess
from typing import Literal

NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256")
"""Every key is an ECDSA P-256 key: six RSA 2048 keys took ~2.5 s of CPU and ~13 s of a start
at load 22, these ~0.05 s (kube-apiserver, etcd, client-go and Python's ssl take both)."""

_EXTENSIONS = {
    "server": "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    "client": "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=clientAuth\n",
    # etcd's JSON gateway dials etcd's own gRPC port with the server's certificate, which
    # --client-cert-auth then checks as a client's.
    "server-and-client": "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                         "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
}


def openssl(folder: pathlib.Path, *args: str) -> None:
    """Run ``openssl ARGS`` in ``folder`` (its output is kept from the test's)."""
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def make_ca(folder: pathlib.Path, name: str = "kubecoord-test-ca") -> None:
    """A self-signed CA in ``folder`` (created if missing): ca.key, ca.crt."""
    folder.mkdir(parents=True, exist_ok=True)
    openssl(folder, "req", "-x509", *NEW_KEY, "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "3650", "-subj", f"/CN={name}")


def issue(folder: pathlib.Path, name: str, subject: str,
          usage: Literal["server", "client", "server-and-client"]) -> None:
    """``name``.key and ``name``.crt signed by the CA of ``folder``, for ``subject``
    (``/O=group/CN=user``), usable as a server's (127.0.0.1, localhost), a client's, or both."""
    extensions = folder / f"{usage}.ext"
    if not extensions.exists():
        extensions.write_text(_EXTENSIONS[usage])
    openssl(folder, "req", *NEW_KEY, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
    openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "3650", "-extfile", extensions.name)
