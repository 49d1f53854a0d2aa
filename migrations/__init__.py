"""Alembic migrations of the metadata store."""
