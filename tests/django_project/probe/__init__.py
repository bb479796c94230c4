"""An app whose handlers write with the ORM, then commit, raise, hang or spoil the transaction."""
