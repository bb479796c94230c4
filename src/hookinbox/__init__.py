"""hookinbox."""
