"""A Django shop: Stripe payments become orders, written with the Django ORM, exactly once.

    python -m hookinbox.examples.django_shop migrate            # Django's tables and hookinbox's
    python -m hookinbox.examples.django_shop runserver          # POST /webhooks/stripe
    python -m hookinbox.examples.django_shop hookinbox_worker   # processes the stored events

`python -m hookinbox.examples.django_shop` is this project's manage.py. The database comes from
SHOP_DATABASE_URL (sqlite:///file.db, the default, or postgresql://...), the Stripe secret from
STRIPE_WEBHOOK_SECRET. The pieces to copy into your project: `orders/webhooks.py` (the inbox
and its handler), the hookinbox lines of `settings.py` and `urls.py`.
"""
