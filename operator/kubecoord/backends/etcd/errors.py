"""etcd's answers and etcd3gw's/requests' exceptions -> kubecoord.errors, in one place.

transport.py already sorts every failed request into answered (GatewayError, with etcd's
gRPC code), not answered (BackendUnavailableError) and unanswered after sending
(Unanswered). Reads and idempotent writes meet only the first two here; a write whose
answer was lost never reaches this table: outcomes.py resolves it first.
"""

from __future__ import annotations

import requests
from etcd3gw.exceptions import Etcd3Exception

from kubecoord._core.translation import ErrorRow, Translator
from kubecoord.backends.etcd.transport import GatewayError, Unanswered
from kubecoord.errors import BackendUnavailableError, OutcomeUnknownError

_TABLE: list[ErrorRow] = [
    (Unanswered, OutcomeUnknownError, "etcd did not answer a write (it may have been applied)"),
    (GatewayError, BackendUnavailableError, "etcd refused the request"),
    (requests.exceptions.RequestException, BackendUnavailableError, "etcd unreachable"),
    (Etcd3Exception, BackendUnavailableError, "etcd client error"),
]

_TRANSLATOR = Translator(_TABLE, client="etcd", catch=(Unanswered, GatewayError, requests.exceptions.RequestException,
                                                       Etcd3Exception))
translate = _TRANSLATOR.translate
translating = _TRANSLATOR.translating
