"""The public surface is small and explicit: what `__all__` lists is what users import."""

from __future__ import annotations

import hookinbox
import hookinbox.claims
import hookinbox.django
import hookinbox.fastapi
import hookinbox.flask
import hookinbox.sources


def test_exports_are_sorted_and_importable() -> None:
    adapters = (hookinbox.fastapi, hookinbox.flask, hookinbox.django)
    for module in (hookinbox, hookinbox.sources, hookinbox.claims, *adapters):
        assert module.__all__ == sorted(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_the_documented_entry_points_exist() -> None:
    from hookinbox import Inbox, NotReady
    from hookinbox.sources import GitHub, HMACSource, Shopify, StandardWebhooks, Stripe

    inbox = Inbox("sqlite:///never-opened.db")
    for source in (
        Stripe(secret="whsec_x"),
        Shopify(secret="x"),
        GitHub(secret="x"),
        StandardWebhooks(secret="whsec_eHh4eA=="),
        HMACSource(name="acme", secret="x", signature_header="X-Acme-Signature"),
    ):
        inbox.add_source(source)
    assert sorted(inbox.sources) == ["acme", "github", "shopify", "standard", "stripe"]
    assert issubclass(NotReady, hookinbox.HookinboxError)


def test_every_error_derives_from_the_root() -> None:
    errors = [getattr(hookinbox, name) for name in hookinbox.__all__ if name.endswith("Error")]
    errors += [hookinbox.MissingHeader, hookinbox.BadSignature, hookinbox.NotReady]
    for error in errors:
        assert issubclass(error, hookinbox.HookinboxError)
        assert str(error()) == (error.__doc__ or "").strip().splitlines()[0]
