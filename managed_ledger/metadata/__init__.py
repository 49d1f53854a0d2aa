"""The SQL metadata store (the only place SQLAlchemy is used, with migrations/)."""
