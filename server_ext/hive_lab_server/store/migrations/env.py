"""Programmatic alembic environment: no alembic.ini; the caller passes a live connection."""

from alembic import context

from hive_lab_server.store.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
