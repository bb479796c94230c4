"""Ed25519 public keys of small order are refused at configuration (issue 31, item 8).

Ed25519's check is [S]B = R + [k]A. With A of small order (the identity, the point of order
2, those of order 4 and 8), R chosen of small order too and S = 0, both sides are the
identity for most messages whatever k is: anyone can forge a signature for any body. The
point of order 8 times 8 is the identity, so [k]A cycles through eight points and a forger
needs a handful of tries at most; for the identity itself the first try works.
OpenSSL (through cryptography) verifies such signatures as it is asked to. So Discord and
Standard Webhooks `v1a` refuse a configured key whose eightfold multiple is the identity,
with a `ConfigurationError` when the source is built: every small-order point, in each
encoding (the sign bit set on a point whose x is 0, a y of p or p + 1), and a key that is no
point of the curve at all or has a y of p or more.

What it proves: each such key is refused by both sources; real keys (RFC 8032's test vector,
a key of the test kit) are accepted; and with a real key the S = 0 forgery over the identity
is 401 over the whole receive path.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hookinbox import Inbox
from hookinbox._errors import ConfigurationError
from hookinbox.sources import Discord, StandardWebhooks
from hookinbox.testing import ed25519_test_key

P = 2**255 - 19


def _encode(y: int, sign: int = 0) -> bytes:
    return (y | sign << 255).to_bytes(32, "little")


# The eight points of small order, by their y coordinate (x from the curve and the sign bit).
ORDER_8_Y = int.from_bytes(
    bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little"
)
SMALL_ORDER = {
    "identity (order 1)": _encode(1),
    "order 2": _encode(P - 1),
    "order 4, x positive": _encode(0),
    "order 4, x negative": _encode(0, 1),
    "order 8, first": _encode(ORDER_8_Y),
    "order 8, first, negated": _encode(ORDER_8_Y, 1),
    "order 8, second": _encode(P - ORDER_8_Y),
    "order 8, second, negated": _encode(P - ORDER_8_Y, 1),
}
# The same points written another way: a sign bit on x = 0, or y + p (below 2**255).
NON_CANONICAL = {
    "identity with the sign bit": _encode(1, 1),
    "order 2 with the sign bit": _encode(P - 1, 1),
    "identity as p + 1": _encode(P + 1),
    "order 4 as p": _encode(P),
    "order 4 as p, sign bit": _encode(P, 1),
}
NOT_ON_THE_CURVE = {"y = 2": _encode(2), "all ones": b"\xff" * 32}
REFUSED = {**SMALL_ORDER, **NON_CANONICAL, **NOT_ON_THE_CURVE}

RFC8032_PUBLIC = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"


def _whpk(raw: bytes) -> str:
    return "whpk_" + base64.b64encode(raw).decode()


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_small_order_or_malformed_key_is_refused_by_discord(name: str) -> None:
    with pytest.raises(ConfigurationError, match="Ed25519 public key"):
        Discord(public_key=REFUSED[name].hex())


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_small_order_or_malformed_key_is_refused_by_standard_webhooks(name: str) -> None:
    with pytest.raises(ConfigurationError, match="Ed25519 public key"):
        StandardWebhooks(public_key=_whpk(REFUSED[name]))


def test_one_bad_key_among_good_ones_is_refused() -> None:
    good = ed25519_test_key().hex
    with pytest.raises(ConfigurationError, match="small order"):
        Discord(public_key=[good, SMALL_ORDER["identity (order 1)"].hex()])


def test_real_keys_are_accepted() -> None:
    Discord(public_key=[RFC8032_PUBLIC, ed25519_test_key().hex])
    StandardWebhooks(public_key=[_whpk(bytes.fromhex(RFC8032_PUBLIC)), ed25519_test_key().whpk])


def test_the_library_alone_verifies_a_forgery_under_the_identity() -> None:
    """Why the check is ours to make: OpenSSL takes (identity, S = 0) as a valid signature
    of any message under the identity key (if a release ever refuses it, this fails, and the
    check stays as a second line)."""
    identity = SMALL_ORDER["identity (order 1)"]
    forged = identity + bytes(32)
    key = Ed25519PublicKey.from_public_bytes(identity)
    for message in (b"1700000000{}", b'1700000000{"type":2,"id":"1"}'):
        key.verify(forged, message)  # no InvalidSignature: the forgery the issue found


def test_the_s_zero_forgery_is_refused_with_a_real_key(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/inbox.db")
    inbox.add_source(Discord(public_key=ed25519_test_key().hex))
    body = json.dumps({"type": 2, "id": "1179000000000000001", "data": {}}).encode()
    now = str(int(time.time()))
    replies = []
    for point in SMALL_ORDER.values():  # every small-order R with S = 0
        headers = {"X-Signature-Ed25519": (point + bytes(32)).hex(), "X-Signature-Timestamp": now}
        replies.append(inbox.receive("discord", headers, body).status_code)
    inbox.close()
    assert replies == [401] * len(SMALL_ORDER)
    with pytest.raises(InvalidSignature):
        public = Ed25519PublicKey.from_public_bytes(bytes.fromhex(ed25519_test_key().hex))
        public.verify(SMALL_ORDER["identity (order 1)"] + bytes(32), now.encode() + body)
