"""What every package shares and nothing below it depends on: the root error and its kinds."""
