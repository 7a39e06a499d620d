"""The store's database: its tables (schema.py), its engine for SQLite or PostgreSQL (engine.py) and
the Alembic migrations that build the same schema on either (migrations/)."""
