"""The one list of providers: `hookinbox.sources.__all__`, each class declared by its module.

Everything else that names every provider is derived from it (the test kit's signers, the
tests' lists of sources and headers) or checked against it here (the table of
docs/sources/README.md), so a provider added without a declaration, a signer, an example or a
row in the table fails a test instead of being left out silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.http.header_sources import example_keys

import hookinbox.sources
from hookinbox._errors import VerificationError
from hookinbox._headers import normalize_headers
from hookinbox.sources import BatchSource, Source
from hookinbox.sources._provider import Provider, provider_of
from hookinbox.testing import paypal_test_certificate, sendgrid_test_key, sign
from hookinbox.testing._signing import providers, signer_for

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sources"
BASES = {Source, BatchSource}
PROVIDERS = providers()
KEYS = example_keys(paypal_test_certificate().pem, sendgrid_test_key().public_key)


def _exported_classes() -> list[type[Source]]:
    values = [getattr(hookinbox.sources, name) for name in hookinbox.sources.__all__]
    return [v for v in values if isinstance(v, type) and issubclass(v, Source) and v not in BASES]


def test_every_exported_source_class_is_declared_by_its_module() -> None:
    classes = _exported_classes()
    assert [p.source for p in PROVIDERS] == classes
    for cls in classes:
        declared = provider_of(cls)
        assert declared is not None and declared.source is cls, cls.__name__
        assert cls.__module__.startswith("hookinbox.sources._"), cls.__name__
    assert len(classes) == len(set(classes)) == 68


@pytest.mark.parametrize("declared", PROVIDERS, ids=lambda p: p.source.__name__)
def test_every_provider_signs_its_example_event_and_its_source_verifies_it(
    declared: Provider,
) -> None:
    source = declared.example(KEYS)
    assert type(source) is declared.source
    assert signer_for(source) is not None
    headers, body = sign(source, declared.event("tag1"), at=1_700_000_000)
    headers = {name.lower(): value for name, value in headers.items()}
    header = (declared.signature_header or "").lower()
    if header:
        assert header in headers
    normalized = normalize_headers(headers)
    if isinstance(source, BatchSource):
        [identity] = source.authenticate_batch(normalized, body, now=1_700_000_000)
        assert declared.batch_key is not None
        assert identity.event_id == declared.batch_key(declared.event("tag1"))
    else:
        identity = source.authenticate(normalized, body, now=1_700_000_000)
        assert identity.invalid is None
    if not header:
        return  # unsigned (fetched from the provider), or signed in the body: its own tests
    forged = {**headers, header: headers[header] + "0"}
    with pytest.raises(VerificationError):
        source.authenticate(normalize_headers(forged), body, now=1_700_000_000)


# -- the table of docs/sources/README.md ---------------------------------------------------------


def _table_rows() -> list[list[str]]:
    text = (DOCS / "README.md").read_text()
    table = text.split("| provider | class", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip("|").split(" | ") for line in table.splitlines()[2:]]
    return [[cell.strip() for cell in row] for row in rows]


def test_the_sources_table_has_one_row_per_provider_class() -> None:
    """Column 2 names the class (`Name`, maybe with its extra), column 3 its default name,
    the last column its page."""
    by_class: dict[str, list[str]] = {}
    for row in _table_rows():
        name = re.match(r"`(\w+)`", row[1])
        assert name is not None, row
        assert name.group(1) not in by_class, f"two rows for {name.group(1)}"
        by_class[name.group(1)] = row
    assert sorted(by_class) == sorted(p.source.__name__ for p in PROVIDERS)
    for declared in PROVIDERS:
        row = by_class[declared.source.__name__]
        if declared.source.default_name != "hmac":  # HMACSource: `name=` is required
            assert row[2] == f"`{declared.source.default_name}`", row
        page = re.search(r"\]\((\S+\.md)\)$", row[-1])
        assert page is not None and (DOCS / page.group(1)).is_file(), row
