"""Managed ledger: a topic's ordered list of ledgers, cursors, dedup, retention, metadata store."""
