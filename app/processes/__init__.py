"""One module per process: each has `run(settings)`."""
