"""Signature edge cases on every source class, clock skew, and constant-time comparisons.

What it proves, for every signed source class in `hookinbox.sources` (a test fails when a new
class is not covered):
- several signatures in one header: one right among wrong ones verifies where the format
  carries several (Stripe `v1`, Paddle `h1`, Standard Webhooks and signed GitLab `v1,`); a
  header repeated with several values is refused where the format carries one; all wrong is
  refused everywhere; public-key signatures (Discord, SendGrid) count at most 2 distinct;
- rotation: a source given [old, new] verifies both and no other; given [new], not the old;
- the right digest under a wrong scheme label only (`v0=`, `v2=`, `sha1=`, `v1a,`, another
  PayPal algorithm) is refused;
- an empty, blank or missing secret is a `ConfigurationError` when the source (or the API
  credentials of PayPal and Mollie) is built, and `hookinbox serve` of an app with a blank
  secret exits 2 with one line;
- clock skew: a timestamp past the tolerance, in the past or the future, is refused, inside
  it accepted, at the boundary accepted; another tolerance moves the boundary;
- every comparison of a signature, digest, MAC or token in src/hookinbox goes through
  `hmac.compare_digest` (an AST check, itself checked on snippets it must flag).

How: in-process `authenticate` calls for the exhaustive matrix; a real `hookinbox serve` on
loopback for several signatures and skew, with the real clock and margins of 70 s or more.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import hookinbox.sources
from hookinbox._errors import ConfigurationError
from hookinbox.sources import (
    Adyen,
    AmazonSNS,
    BatchSource,
    Braintree,
    GooglePubSub,
    Mailgun,
    MicrosoftGraph,
    MicrosoftGraphRich,
    MollieAPI,
    MollieClassic,
    PayPalAPI,
    Plaid,
    Source,
)
from tests.apps import guarded
from tests.reliability._report import Trial, record
from tests.reliability._source_kinds import KINDS, NOW, Kind, standard_key, status
from tests.support.server import run_cli, running_server

SRC = Path(hookinbox.sources.__file__).resolve().parents[1]
NO_SECRET = {MollieClassic}  # fetch-to-verify: it holds no secret, it asks Mollie's API
# Their signatures are in the body and cover no header: their edges are in
# test_source_mailgun.py and test_source_adyen.py (rotation, a tampered item, blank keys), and
# test_source_amazon_sns.py (a changed field, another certificate, the topics); Braintree's
# form fields in test_source_braintree.py (pairs, rotation, a changed payload, the XML refused);
# Microsoft Graph's clientState per notification in test_source_microsoft_graph.py.
SIGNED_IN_BODY = {Mailgun, Adyen, AmazonSNS, Braintree, MicrosoftGraph}
# A signed token (JWT) rather than a signature list: their hostile cases (alg none, HS256 with a
# public key, expired or future iat, wrong aud, a huge token) are in test_source_pubsub.py and
# test_source_plaid.py.
TOKENS = {GooglePubSub, Plaid, MicrosoftGraphRich}  # Graph's: test_source_microsoft_graph_rich.py


def test_every_signed_source_class_is_covered() -> None:
    classes = {
        value
        for name in hookinbox.sources.__all__
        if isinstance(value := getattr(hookinbox.sources, name), type)
        and issubclass(value, Source)
        and value not in (Source, BatchSource)
    }
    assert classes == {kind.cls for kind in KINDS} | NO_SECRET | SIGNED_IN_BODY | TOKENS


class Tally:
    """A matrix's results: what differed from the expected status, and how many deliveries
    that should have been refused were accepted (the report's `doubled`)."""

    def __init__(self) -> None:
        self.tried = 0
        self.mismatches: list[str] = []
        self.doubled = 0

    def check(self, what: str, got: int, expected: int) -> None:
        self.tried += 1
        if got != expected:
            self.mismatches.append(f"{what}: {got}, expected {expected}")
        if expected == 401 and got < 300:
            self.doubled += 1

    def assert_as_expected(self) -> None:
        assert self.mismatches == [], "\n".join(self.mismatches)


def _corrupt(entry: str) -> str:
    """The entry with one character of its digest changed (before any base64 padding)."""
    position = len(entry.rstrip("=")) - 2
    # Not "a" to "A": hex is read in either case, so that would change nothing.
    replacement = "A" if entry[position].upper() != "A" else "B"
    return entry[:position] + replacement + entry[position + 1 :]


def test_several_signatures_in_one_header() -> None:
    tally = Tally()
    for kind in KINDS:
        old, right, stranger = kind.secrets
        source = kind.build([right])
        entry = kind.sign(right, kind.body, NOW)
        others = [kind.sign(old, kind.body, NOW), kind.sign(stranger, kind.body, NOW)]
        others.append(_corrupt(entry))
        cases = {
            "right alone": ([entry], 200),
            # Every format: a repeated header reaches a source joined with commas by WSGI
            # servers, so each part is a candidate (at most 16), one-signature formats too.
            "right among wrong": ([others[0], entry, others[1]], 200),
            "all wrong": (others, 401),
        }
        if kind.costly:  # public-key signatures: at most 2 distinct (test_signature_candidates)
            cases["right among wrong"] = ([others[0], entry], 200)
            cases["right among two wrong"] = ([others[0], entry, others[1]], 401)
        for case, (entries, expected) in cases.items():
            got = status(source, kind.assemble(entries, NOW), kind.body)
            tally.check(f"{kind.name} {case}", got, expected)
    tally.assert_as_expected()
    record(
        Trial(
            fault="several signatures in one header (every source class)",
            backend="-",
            deliveries=tally.tried,
            doubled=tally.doubled,
            detail=f"{len(KINDS)} classes; one right among wrong verifies in every format "
            f"({sum(k.several for k in KINDS)} list formats, the rest as repeated headers "
            "joined; public-key ones with one wrong beside it, 401 with two); all wrong "
            "refused in all",
        )
    )


def test_rotation_old_and_new_secret_both_verify_and_no_other() -> None:
    tally = Tally()
    for kind in KINDS:
        old, new, stranger = kind.secrets
        rotating, rotated = kind.build([old, new]), kind.build(new)
        cases = [
            (rotating, old, 200, "[old, new] signed with old"),
            (rotating, new, 200, "[old, new] signed with new"),
            (rotating, stranger, 401, "[old, new] signed with a stranger's"),
            (rotated, old, 401, "[new] signed with old"),
        ]
        for source, signer, expected, case in cases:
            got = status(source, kind.headers([signer]), kind.body)
            tally.check(f"{kind.name} {case}", got, expected)
    tally.assert_as_expected()
    record(
        Trial(
            fault="secret rotation: old and new verify, no other",
            backend="-",
            deliveries=tally.tried,
            doubled=tally.doubled,
            detail=f"{len(KINDS)} classes take a list of secrets (PayPal: of webhook ids)",
        )
    )


def test_the_right_digest_under_a_wrong_scheme_is_refused() -> None:
    tried = 0
    accepted: list[str] = []
    schemed = [kind for kind in KINDS if kind.wrong_schemes]
    for kind in schemed:
        secret = kind.secrets[0]
        source = kind.build(secret)
        assert status(source, kind.headers([secret]), kind.body) == 200, kind.name
        for headers in kind.wrong_scheme_deliveries(secret):
            tried += 1
            if status(source, headers, kind.body) != 401:
                accepted.append(f"{kind.name}: {headers}")
    assert accepted == [], "\n".join(accepted)
    unschemed = sorted(kind.name for kind in KINDS if not kind.wrong_schemes)
    record(
        Trial(
            fault="right digest, wrong scheme label only (v0=, v2=, sha1=, v1a, ...)",
            backend="-",
            deliveries=tried,
            doubled=len(accepted),
            detail=f"{len(schemed)} classes name a scheme; no label in " + ", ".join(unschemed),
        )
    )


BLANK_SECRETS: list[Any] = ["", " ", "\t\n", "\u3000", None, b"whsec_bytes", [], [" "]]


def _blank_with_a_good_one(kind: Kind) -> list[Any]:
    good = kind.secrets[0]
    return [[good, ""], [good, "  "], [good, None]]


@pytest.mark.slow
def test_empty_or_blank_secrets_are_refused_when_configured() -> None:
    tried = 0
    allowed: list[str] = []
    for kind in KINDS:
        kind.build(kind.secrets[0])  # the control: a real secret configures
        for value in [*BLANK_SECRETS, *_blank_with_a_good_one(kind)]:
            tried += 1
            try:
                kind.build(value)
            except ConfigurationError:
                continue
            allowed.append(f"{kind.name}({value!r})")
    credentials: list[Callable[[Any], object]] = [
        lambda v: PayPalAPI(client_id="client", client_secret=v),
        lambda v: PayPalAPI(client_id=v, client_secret="secret"),
        lambda v: MollieAPI(api_key=v),
    ]
    for index, build in enumerate(credentials):
        for value in ["", " ", "\n", None]:
            tried += 1
            try:
                build(value)
            except ConfigurationError:
                continue
            allowed.append(f"credentials #{index}({value!r})")
    assert allowed == [], "accepted: " + ", ".join(allowed)

    blank = run_cli("serve", "tests.apps.guarded:inbox", env={guarded.SECRET_ENV: " \t"})
    tried += 1
    assert blank.returncode == 2, blank.stderr
    lines = blank.stderr.strip().splitlines()
    assert len(lines) == 1 and "secret" in lines[0] and "Traceback" not in blank.stderr, lines
    record(
        Trial(
            fault="empty, blank or missing secret at configuration",
            backend="-",
            deliveries=tried,
            doubled=len(allowed),
            detail=f"{len(KINDS)} source classes refuse {len(BLANK_SECRETS) + 3} bad secrets "
            "each, PayPalAPI and MollieAPI 4 bad credentials each (ConfigurationError); "
            f"`serve` with a blank secret: exit 2, {lines[0]!r}",
        )
    )


def _skew_cases(tolerance: float) -> Iterator[tuple[int, int]]:
    """(offset from now in seconds, expected status) around a tolerance."""
    edge = int(tolerance)
    yield from [(0, 200), (-edge, 200), (edge, 200), (-edge - 1, 401), (edge + 1, 401)]
    yield from [(-edge - 3600, 401), (edge + 3600, 401)]


def test_clock_skew_past_and_future_with_a_configurable_tolerance() -> None:
    tally = Tally()
    timestamped = [kind for kind in KINDS if kind.timestamped]
    # PayPal and Customer.io check no window unless given one, Twitch and Box 600 s (their
    # replay windows); the others default to 300 s.
    for kind in timestamped:
        for tolerance, options in ((300.0, {}), (30.0, {"tolerance": 30.0})):
            if kind.name in ("PayPal", "CustomerIO", "Twitch", "Box") and not options:
                options = {"tolerance": 300.0}
            source = kind.build(kind.secrets[0], **options)
            for offset, expected in _skew_cases(tolerance):
                headers = kind.headers([kind.secrets[0]], at=NOW + offset)
                got = status(source, headers, kind.body)
                tally.check(f"{kind.name} tolerance {tolerance:.0f} offset {offset}", got, expected)
        # Between the two tolerances: refused by the tight one only.
        headers = kind.headers([kind.secrets[0]], at=NOW - 200)
        for tolerance, expected in ((30.0, 401), (300.0, 200)):
            got = status(kind.build(kind.secrets[0], tolerance=tolerance), headers, kind.body)
            tally.check(f"{kind.name} 200 s old, tolerance {tolerance:.0f}", got, expected)
    tally.assert_as_expected()
    untimed = sorted(kind.name for kind in KINDS if not kind.timestamped)
    record(
        Trial(
            fault="clock skew: past and future, default and configured tolerance",
            backend="-",
            deliveries=tally.tried,
            doubled=tally.doubled,
            detail=f"{len(timestamped)} timestamped classes, boundary inclusive at 300 s and "
            "30 s; no signed timestamp in " + ", ".join(untimed),
        )
    )


# -- over HTTP ------------------------------------------------------------------------------


def _stripe(event_id: str, at: int, *entries: str) -> tuple[dict[str, str], bytes]:
    body = json.dumps({"id": event_id, "type": "invoice.paid", "created": at}).encode()
    key = guarded.STRIPE_SECRET.encode()
    right = hmac.new(key, f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    parts = [entry.replace("RIGHT", right) for entry in entries]
    return {"Stripe-Signature": ",".join([f"t={at}", *parts])}, body


def _standard(event_id: str, at: int, *entries: str) -> tuple[dict[str, str], bytes]:
    body = json.dumps({"type": "order.created", "data": {"n": event_id}}).encode()
    key = standard_key(guarded.STANDARD_SECRET)
    digest = hmac.new(key, f"{event_id}.{at}.".encode() + body, hashlib.sha256).digest()
    right = base64.b64encode(digest).decode()
    signature = " ".join(entry.replace("RIGHT", right) for entry in entries)
    headers = {"webhook-id": event_id, "webhook-timestamp": str(at), "webhook-signature": signature}
    return headers, body


def _paddle(event_id: str, at: int, *entries: str) -> tuple[dict[str, str], bytes]:
    body = json.dumps({"event_id": event_id, "event_type": "transaction.paid"}).encode()
    key = guarded.PADDLE_SECRET.encode()
    right = hmac.new(key, f"{at}:".encode() + body, hashlib.sha256).hexdigest()
    parts = [entry.replace("RIGHT", right) for entry in entries]
    return {"Paddle-Signature": ";".join([f"ts={at}", *parts])}, body


Case = tuple[str, str, tuple[dict[str, str], bytes], int]


def _http_cases(now: int) -> list[Case]:
    """(label, source, delivery, expected status); `now` is read once the server runs."""
    w0, w1, w2 = (f"v1={secrets.token_hex(32)}" for _ in range(3))
    b0, b1 = (f"v1,{secrets.token_urlsafe(32)}" for _ in range(2))
    h0 = f"h1={secrets.token_hex(32)}"
    cases: list[Case] = [
        ("stripe right among wrong", "stripe", _stripe("evt_m1", now, w0, "v1=RIGHT", w1), 200),
        ("stripe all wrong", "stripe", _stripe("evt_m2", now, w0, w1, w2), 401),
        ("stripe v0 only", "stripe", _stripe("evt_m3", now, "v0=RIGHT"), 401),
        ("stripe v2 and v0 only", "stripe", _stripe("evt_m4", now, "v2=RIGHT", "v0=RIGHT"), 401),
        ("standard right among wrong", "standard",
         _standard("msg_m5", now, b0, "v1,RIGHT", b1), 200),
        ("standard all wrong", "standard", _standard("msg_m6", now, b0, b1), 401),
        ("standard v1a only", "standard", _standard("msg_m7", now, "v1a,RIGHT"), 401),
        ("paddle right among wrong", "paddle", _paddle("evt_m8", now, h0, "h1=RIGHT"), 200),
    ]  # fmt: skip
    # Margins of 70 s or more around each boundary: the server's clock is this one.
    for source, tolerance, near, far in (("stripe", 300, 200, 400), ("stripe-tight", 30, 2, 100)):
        for offset, expected in ((-far, 401), (far, 401), (-near, 200), (near, 200)):
            delivery = _stripe(f"evt_{source}_{offset}", now + offset, "v1=RIGHT")
            cases.append(
                (f"{source} {offset:+d} s (tolerance {tolerance})", source, delivery, expected)
            )
    return cases


@pytest.mark.slow
def test_several_signatures_and_skew_over_http(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'inbox.db'}"  # verification precedes storage
    got: dict[str, int] = {}
    errors: dict[str, str] = {}
    with running_server("tests.apps.guarded:inbox", database_url, "--no-worker") as base_url:
        cases = _http_cases(int(time.time()))
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for label, source, (headers, body), _ in cases:
                response = client.post(f"/webhooks/{source}", headers=headers, content=body)
                got[label] = response.status_code
                errors[label] = response.json().get("error") or response.json()["status"]
    expected = {label: code for label, _, _, code in cases}
    assert got == expected
    refused = [label for label, code in expected.items() if code == 401]
    assert {errors[label] for label in refused} == {"invalid_signature"}
    record(
        Trial(
            fault="several signatures, wrong schemes, clock skew over HTTP",
            backend="sqlite",
            deliveries=len(cases),
            doubled=sum(1 for label in refused if got[label] < 300),
            detail=f"{len(cases) - len(refused)} accepted, {len(refused)} refused 401: "
            "one right v1 among wrong, v0/v2/v1a only, ±400 s at 300 s, ±100 s at 30 s",
        )
    )


# -- constant-time comparisons --------------------------------------------------------------

SENSITIVE_WORDS = frozenset({
    "signature", "signatures", "sig", "sigs", "digest", "digests", "hexdigest", "mac", "macs",
    "hmac", "token", "tokens", "secret", "secrets", "csrf", "candidate", "candidates", "password",
})  # fmt: skip
METADATA_WORDS = frozenset({
    "name", "names", "header", "headers", "label", "prefix", "field", "fields", "env", "length",
    "algo", "algorithm", "encoding", "url", "path", "option", "type", "size", "version", "scheme",
})  # fmt: skip
"""A last word that makes an identifier describe a secret rather than hold one
(`signature_header`, `token_length`)."""
TIMING_OPS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
EARLY_EXIT_METHODS = frozenset({"startswith", "endswith", "find", "index", "count", "__eq__"})


def _sensitive(identifier: str) -> bool:
    words = [w.lower() for w in re.split(r"_+|(?<=[a-z])(?=[A-Z])", identifier) if w]
    return any(w in SENSITIVE_WORDS for w in words) and words[-1] not in METADATA_WORDS


def _identifiers(node: ast.AST) -> Iterator[str]:
    """The identifiers that say what a value is: a name, an attribute, a called method."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.Call):
        yield from _identifiers(node.func)
    elif isinstance(node, ast.Subscript):
        yield from _identifiers(node.value)
    elif isinstance(node, ast.Starred | ast.UnaryOp):
        yield from _identifiers(node.value if isinstance(node, ast.Starred) else node.operand)


def _holds_secret(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return False
    return any(_sensitive(name) for name in _identifiers(node))


def _sql_column(node: ast.AST) -> bool:
    """`table.c.column`: a SQLAlchemy expression, compared by the database, not by Python."""
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "c"
    )


def timing_unsafe_comparisons(source: str) -> list[tuple[int, str]]:
    """Comparisons of secret-looking values that can exit early (`==`, `in`, `startswith`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                if not isinstance(op, TIMING_OPS) or _sql_column(left) or _sql_column(right):
                    continue
                if _holds_secret(left) or _holds_secret(right):
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EARLY_EXIT_METHODS
            and (_holds_secret(node.func.value) or any(_holds_secret(a) for a in node.args))
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Match) and _holds_secret(node.subject):
            found.append((node.lineno, f"match {ast.unparse(node.subject)}"))
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        "ok = signature == expected",
        "ok = expected != signature",
        "ok = hmac.new(key, body, 'sha256').hexdigest() == header",
        "ok = hashlib.sha256(given).digest() == self._digest",
        "ok = given in self._tokens",
        "ok = session.csrf == form['csrf']",
        "ok = received_sig.startswith(want)",
        "ok = candidate == computed",
        "ok = self.secret == provided",
        "match token:\n    case 'x':\n        pass",
    ],
)
def test_the_checker_flags_timing_unsafe_comparisons(snippet: str) -> None:
    assert timing_unsafe_comparisons(snippet), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        "ok = hmac.compare_digest(signature, expected)",
        "ok = signature is None",
        "ok = name == self.signature_name",
        "ok = len(token) < MIN_TOKEN_LENGTH",
        "query = query.where(events.c.lease_token == token)",
        "ok = version != 'v1'",
    ],
)
def test_the_checker_passes_constant_time_and_non_secret_comparisons(snippet: str) -> None:
    assert timing_unsafe_comparisons(snippet) == [], snippet


def test_every_secret_comparison_in_the_package_is_constant_time() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 50, f"the package was not found at {SRC}"
    found = [
        f"{path.relative_to(SRC.parent)}:{line}: {text}"
        for path in files
        for line, text in timing_unsafe_comparisons(path.read_text())
    ]
    assert found == [], "use hmac.compare_digest:\n" + "\n".join(found)
    uses = sum(path.read_text().count("compare_digest(") for path in files)
    assert uses >= 4  # sources, dashboard token and CSRF, claims: the checker saw them
