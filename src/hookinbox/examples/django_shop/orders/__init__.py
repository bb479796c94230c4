"""The shop's own app: orders, and the webhook handler that creates them."""
