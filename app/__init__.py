"""Quire's application layer: FastAPI app, settings, wiring, command line."""
