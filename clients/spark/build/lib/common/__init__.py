"""What every package shares and nothing below it depends on: the root error and its kinds, and
a histogram kept as plain numbers (for the processes' Prometheus metrics)."""
