"""The bookie's storage engine: journal with group commit, on-disk index, garbage collector.

Entry point: `bookie.storage.engine.LedgerStorage` with a `StorageConfig`.
"""
