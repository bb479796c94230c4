"""Example applications shipped with hookinbox; copy one as the start of your own."""
