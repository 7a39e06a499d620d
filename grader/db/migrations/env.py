"""Alembic's entry point: run the migrations on the connection the store hands over.

Each migration runs in its own transaction. On PostgreSQL an advisory lock keeps two processes
starting at once (a web server and its workers) from migrating the same database together.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transaction_per_migration=True, render_as_batch=True)
if connection.dialect.name == "postgresql":
    connection.exec_driver_sql("SELECT pg_advisory_lock(424242)")
    connection.commit()
try:
    context.run_migrations()
finally:
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql("SELECT pg_advisory_unlock(424242)")
        connection.commit()
