"""PayPal's verify-webhook-signature API: the online alternative to checking signatures here.

One OAuth client-credentials token serves many calls until shortly before it expires. The
event is sent as the exact bytes received, spliced into the request: PayPal checks its CRC32,
and a parsed and re-serialised event (other spacing, other number forms) would not match.

Answers: `SUCCESS` verifies; `FAILURE` or a refused request (4xx) is `BadSignature` (401);
an unreachable or failing PayPal, or credentials PayPal refuses, is `VerificationUnavailable`
(503): neither is the sender's fault, and PayPal retries.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx

from hookinbox._errors import BadSignature, ConfigurationError, VerificationUnavailable
from hookinbox._logging import logger
from hookinbox.sources._http import api_base_url, json_answer

log = logger("hookinbox.sources._paypal")

LIVE = "https://api-m.paypal.com"
SANDBOX = "https://api-m.sandbox.paypal.com"
DEFAULT_TIMEOUT = 10.0
TOKEN_MARGIN = 60.0  # renew a token this many seconds before PayPal says it expires


@dataclass(frozen=True, slots=True)
class Transmission:
    """The signature headers of one delivery, as PayPal's API names them."""

    auth_algo: str
    cert_url: str
    transmission_id: str
    transmission_sig: str
    transmission_time: str


class PayPalAPI:
    """Credentials and address for online verification; pass it as `PayPal(online=...)`."""

    def __init__(
        self,
        *,
        client_id: str,
        client_secret: str,
        base_url: str = LIVE,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not _text(client_id) or not _text(client_secret):
            raise ConfigurationError("PayPal online verification needs a client id and secret")
        if timeout <= 0:
            raise ConfigurationError("the PayPal API timeout must be positive")
        self._credentials = (client_id, client_secret)
        self.base_url = api_base_url(base_url, "the PayPal API base URL")
        self.timeout = timeout
        self._token: tuple[str, float] | None = None  # (token, monotonic expiry)
        self._token_lock = threading.Lock()

    def __repr__(self) -> str:  # never the secret
        return f"PayPalAPI(base_url={self.base_url!r})"

    def verify(self, transmission: Transmission, webhook_id: str, body: bytes) -> bool:
        """True if PayPal says the delivery is its own for `webhook_id`, False if not."""
        content = _request_body(transmission, webhook_id, body)
        for renewed in (False, True):
            token = self._access_token(renew=renewed)
            response = self._post(
                "/v1/notifications/verify-webhook-signature",
                content=content,
                headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
            )
            if response.status_code != 401:
                break  # a 401 means the token lapsed early: renew it once
        if response.status_code == 200:
            status = json_answer(response, "PayPal").get("verification_status")
            if status not in ("SUCCESS", "FAILURE"):
                raise VerificationUnavailable(f"PayPal answered verification_status {status!r}")
            return bool(status == "SUCCESS")
        if response.status_code in (400, 404, 422):
            raise BadSignature(f"PayPal refused to verify the delivery ({response.status_code})")
        log.warning("PayPal verify-webhook-signature answered %d", response.status_code)
        raise VerificationUnavailable(f"PayPal's verification API answered {response.status_code}")

    def _access_token(self, *, renew: bool) -> str:
        with self._token_lock:  # concurrent deliveries share one token request
            if self._token is not None and not renew and time.monotonic() < self._token[1]:
                return self._token[0]
            response = self._post(
                "/v1/oauth2/token",
                data={"grant_type": "client_credentials"},
                auth=self._credentials,
            )
            if response.status_code != 200:
                # Wrong credentials are an operator's problem, not the sender's: 503, loudly.
                log.error("PayPal refused the OAuth client credentials (%d)", response.status_code)
                raise VerificationUnavailable(
                    f"PayPal's OAuth token request answered {response.status_code}"
                )
            answer = json_answer(response, "PayPal's OAuth token endpoint")
            token, expires_in = answer.get("access_token"), answer.get("expires_in")
            if not isinstance(token, str) or not token:
                raise VerificationUnavailable("PayPal's OAuth answer has no access_token")
            lifetime = float(expires_in) if isinstance(expires_in, int | float) else 0.0
            self._token = (token, time.monotonic() + lifetime - TOKEN_MARGIN)
            return token

    def _post(self, path: str, **kwargs: object) -> httpx.Response:
        try:
            with httpx.Client(base_url=self.base_url, timeout=self.timeout) as client:
                return client.post(path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            log.warning("calling PayPal %s failed: %r", path, exc)
            raise VerificationUnavailable(
                f"PayPal's API cannot be reached: {type(exc).__name__}"
            ) from exc


def _text(value: object) -> bool:
    """A usable credential: a string with something besides white space."""
    return isinstance(value, str) and bool(value.strip())


def _request_body(transmission: Transmission, webhook_id: str, body: bytes) -> bytes:
    """The verification request with the event's own bytes as `webhook_event`."""
    try:
        event = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadSignature("the body is not UTF-8 JSON, so PayPal did not sign it") from exc
    if not isinstance(event, dict):
        raise BadSignature("the body is not a JSON object, so PayPal did not sign it")
    fields = {
        "auth_algo": transmission.auth_algo,
        "cert_url": transmission.cert_url,
        "transmission_id": transmission.transmission_id,
        "transmission_sig": transmission.transmission_sig,
        "transmission_time": transmission.transmission_time,
        "webhook_id": webhook_id,
    }
    head = json.dumps(fields)
    return head[:-1].encode() + b', "webhook_event": ' + body + b"}"
