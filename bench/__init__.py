"""Benchmarks: `make bench`, `make bench-bookie`, `make bench-ml`, `make bench-compaction`."""
