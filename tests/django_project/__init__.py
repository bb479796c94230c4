"""A real Django project for the Django adapter's tests (database: PROBE_DATABASE_URL)."""

SECRET = "whsec_probe"
"""The probe inbox's Stripe secret (here: the tests import it without starting Django)."""
