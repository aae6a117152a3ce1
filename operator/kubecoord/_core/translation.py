"""A client library's exceptions -> kubecoord.errors, the one way every backend does it.

A backend lists (its library's exception class, the kubecoord error, a message) in order;
the first class that matches wins — by class, never by message — and the message names
what happened, with the library's own text (300 characters at most) behind it. What no
row matches becomes a plain CoordinationError, so nothing of the library leaks.

Usage (a backend's errors.py)::

    _TRANSLATOR = Translator([(kz.ConnectionLoss, BackendUnavailableError, "connection lost"), ...],
                             client="ZooKeeper", catch=(kz.KazooException,))
    translate, translating = _TRANSLATOR.translate, _TRANSLATOR.translating
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from kubecoord.errors import CoordinationError

ErrorRow = tuple[type[BaseException], type[CoordinationError], str]
DETAIL_CHARS = 300


class Translator:
    def __init__(self, table: Sequence[ErrorRow], *, client: str, catch: tuple[type[BaseException], ...]) -> None:
        self._table = list(table)
        self._client = client
        self._catch = catch

    def translate(self, exc: BaseException) -> CoordinationError:
        """The kubecoord error for a library exception (CoordinationError as a last resort)."""
        for theirs, ours, message in self._table:
            if isinstance(exc, theirs):
                detail = f"{message}: {type(exc).__name__}"
                if str(exc):
                    detail += f" ({str(exc)[:DETAIL_CHARS]})"
                return ours(detail)
        return CoordinationError(f"unexpected {self._client} client error: {type(exc).__name__}: {exc}")

    @contextlib.contextmanager
    def translating(self) -> Iterator[None]:
        """Re-raise the library's exceptions (those of ``catch``) as kubecoord errors."""
        try:
            yield
        except CoordinationError:
            raise
        except self._catch as exc:
            raise self.translate(exc) from exc
