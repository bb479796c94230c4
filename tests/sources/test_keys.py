"""The key fetcher's allow-lists and cache rules, on URLs and answers alone (no network).

Each provider's list is checked with the URLs an attacker would write: look-alike hosts, other
schemes, IP literals in every spelling resolvers accept, user information, ports, paths. The
fetches themselves (what reaches a host, redirects, the cache over time) are tested with a
real HTTPS server in each provider's tests (test_source_amazon_sns.py, _pubsub, _plaid).
"""

from __future__ import annotations

import httpx
import pytest

from hookinbox._errors import BadSignature
from hookinbox.sources._amazon_sns import CERTIFICATES, SUBSCRIBE_URLS
from hookinbox.sources._keys import _max_age
from hookinbox.sources._plaid import PLAID_API
from hookinbox.sources._pubsub import GOOGLE_KEYS

SNS = "/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"
ACCEPTED = [
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com" + SNS),
    (CERTIFICATES, "https://SNS.EU-WEST-1.AMAZONAWS.COM:443" + SNS),
    (CERTIFICATES, "https://sns.cn-north-1.amazonaws.com.cn" + SNS),
    (CERTIFICATES, "HTTPS://sns.us-east-1.amazonaws.com" + SNS),  # the scheme's case is no host
    (SUBSCRIBE_URLS, "https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&Token=t"),
    (GOOGLE_KEYS, "https://www.googleapis.com/oauth2/v3/certs"),
    (PLAID_API, "https://production.plaid.com/webhook_verification_key/get"),
    (PLAID_API, "https://sandbox.plaid.com/webhook_verification_key/get"),
]
REFUSED = [
    (CERTIFICATES, "http://sns.us-east-1.amazonaws.com" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com.evil.com" + SNS),
    (CERTIFICATES, "https://evil-sns.us-east-1.amazonaws.com" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.co" + SNS),
    (CERTIFICATES, "https://user@sns.us-east-1.amazonaws.com" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com:444" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com" + SNS + "?a=b"),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com" + SNS + " "),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com/%2e%2e" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com" + SNS.replace(".pem", ".PEM")),
    (CERTIFICATES, "https://127.0.0.1" + SNS),
    (CERTIFICATES, "https://0x7f000001" + SNS),
    (CERTIFICATES, "https://2130706433" + SNS),
    (CERTIFICATES, "https://127.1" + SNS),
    (CERTIFICATES, "https://[::ffff:127.0.0.1]" + SNS),
    (CERTIFICATES, "https://sns.us-east-1.amazonaws.com" + SNS + "\u200b"),
    (CERTIFICATES, "//sns.us-east-1.amazonaws.com" + SNS),
    (SUBSCRIBE_URLS, "https://sns.us-west-2.amazonaws.com/other?Action=ConfirmSubscription"),
    (GOOGLE_KEYS, "https://www.googleapis.com/oauth2/v1/certs"),
    (GOOGLE_KEYS, "https://googleapis.com/oauth2/v3/certs"),
    (GOOGLE_KEYS, "https://www.googleapis.com.evil.com/oauth2/v3/certs"),
    (GOOGLE_KEYS, "https://www.googleapis.com/oauth2/v3/certs?redirect=x"),
    (PLAID_API, "https://development.plaid.com/webhook_verification_key/get"),
    (PLAID_API, "https://production.plaid.com.evil.com/webhook_verification_key/get"),
]


@pytest.mark.parametrize(("allow", "url"), ACCEPTED, ids=[u for _, u in ACCEPTED])
def test_the_providers_own_urls_are_allowed(allow: object, url: str) -> None:
    allow.check(url)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("allow", "url"), REFUSED, ids=[u for _, u in REFUSED])
def test_anything_else_is_refused(allow: object, url: str) -> None:
    with pytest.raises(BadSignature, match="not on the provider's hosts"):
        allow.check(url)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("header", "age"),
    [
        (None, None),
        ("public, max-age=19826, must-revalidate, no-transform", 19826.0),
        ('max-age="600"', 600.0),
        ("no-store", 0.0),
        ("private, no-cache", 0.0),
        ("s-maxage=10", None),
    ],
)
def test_the_cache_age_is_read_from_cache_control(header: str | None, age: float | None) -> None:
    headers = httpx.Headers({"cache-control": header} if header else {})
    assert _max_age(headers) == age
