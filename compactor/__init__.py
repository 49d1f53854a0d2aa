"""The compactor: compaction service and the PySpark job (the only package that imports PySpark)."""
