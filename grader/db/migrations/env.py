"""Alembic's entry point: run the migrations on the connection the store hands over.

Each migration runs in its own transaction. The store holds its migration lock around the whole upgrade
(grader.db.engine.migration_lock): two processes starting at once on one database migrate it once.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transaction_per_migration=True, render_as_batch=True)
context.run_migrations()
