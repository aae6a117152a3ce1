"""A backend connection's secrets, from the Secret a resource's spec names.

A Secret of the resource's namespace (``spec.etcd.secretName``) may hold:

==========  ====================================================================
key         meaning
==========  ====================================================================
username    the backend user (with ``password``)
password    its password
ca.crt      PEM: the certificate authorities the server's certificate is checked
            against (TLS only; without it, the system's)
tls.crt     PEM: the client certificate (TLS only; with ``tls.key``)
tls.key     PEM: its private key
==========  ====================================================================

Other keys are ignored, so a ``kubernetes.io/tls`` or ``kubernetes.io/basic-auth``
Secret serves as it is. ``connection_options`` turns the Secret's data into connect()
options (``username``, ``password``, ``tls``), or raises InvalidArgumentError naming the
Secret and what is wrong with it; the API server cannot check another object at
admission, so this is where a Secret is judged. TLS material is written to files (what
the client library takes): one private directory per process (mode 0700, files 0600),
a folder per distinct content, never removed while the process runs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import pathlib
import tempfile
import threading
from typing import Any

from kubecoord.errors import InvalidArgumentError
from kubecoord.resources.specs import Credentials

KEYS = ("username", "password", "ca.crt", "tls.crt", "tls.key")
"""The keys of a connection Secret that kubecoord reads."""
_TLS_FILES = {"ca.crt": "ca_file", "tls.crt": "certfile", "tls.key": "keyfile"}
_lock = threading.Lock()
_folder: pathlib.Path | None = None


def connection_options(credentials: Credentials, data: dict[str, str] | None) -> dict[str, Any]:
    """connect() options from the Secret's ``data`` (base64 values, as the API serves them;
    None: the Secret does not exist, or none is named). InvalidArgumentError for a Secret
    that does not exist or cannot be used."""
    where = f"Secret {credentials.namespace}/{credentials.secret} ({credentials.field})"
    if credentials.secret is not None and data is None:
        raise InvalidArgumentError(f"{where} does not exist")
    values = _decoded(where, data or {})
    if credentials.secret is not None and not set(values) & set(KEYS):
        raise InvalidArgumentError(f"{where} holds none of {', '.join(KEYS)}")
    options: dict[str, Any] = {}
    if ("username" in values) != ("password" in values):
        raise InvalidArgumentError(f"{where} must hold username and password together")
    if "username" in values:
        options["username"], options["password"] = values["username"], values["password"]
    pems = {key: values[key] for key in _TLS_FILES if key in values}
    if pems and not credentials.tls:
        raise InvalidArgumentError(
            f"{where} holds {', '.join(sorted(pems))}, which only a TLS connection uses: set tls: true"
        )
    if ("tls.crt" in pems) != ("tls.key" in pems):
        raise InvalidArgumentError(f"{where} must hold tls.crt and tls.key together (a client certificate)")
    for key, pem in pems.items():
        if "-----BEGIN " not in pem:
            raise InvalidArgumentError(f"{where}: {key} is not PEM (no -----BEGIN line)")
    if credentials.tls:
        options["tls"] = _tls_files(pems)
    return options


def _decoded(where: str, data: dict[str, str]) -> dict[str, str]:
    values = {}
    for key in KEYS:
        if key not in data:
            continue
        try:
            values[key] = base64.b64decode(data[key], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise InvalidArgumentError(f"{where}: {key} is not base64 of UTF-8 text") from None
        if not values[key]:
            raise InvalidArgumentError(f"{where}: {key} is empty")
    return values


def _tls_files(pems: dict[str, str]) -> dict[str, str]:
    """The ``tls`` option: each PEM in a file of its own, under a folder named by the content."""
    if not pems:
        return {}
    digest = hashlib.sha256(repr(sorted(pems.items())).encode()).hexdigest()[:32]
    folder = _private_folder() / digest
    with _lock:
        folder.mkdir(mode=0o700, exist_ok=True)
        paths = {}
        for key, pem in pems.items():
            path = folder / key
            if not path.exists():
                temporary = folder / f".{key}.{os.getpid()}"
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as out:
                    out.write(pem)
                os.replace(temporary, path)
            paths[_TLS_FILES[key]] = str(path)
    return paths


def _private_folder() -> pathlib.Path:
    global _folder
    with _lock:
        if _folder is None:
            _folder = pathlib.Path(tempfile.mkdtemp(prefix="kubecoord-tls-"))  # mode 0700
        return _folder
