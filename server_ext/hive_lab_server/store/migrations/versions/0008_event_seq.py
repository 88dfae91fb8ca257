"""State changes are the events websocket's sequence: ``job_events.id`` is an event's ``seq`` and must
never be reused, also when the newest rows are gone (a restored store, a prune). PostgreSQL's sequence
never reuses values; SQLite's rowid does, unless the table is AUTOINCREMENT, so SQLite rebuilds the
table as AUTOINCREMENT (rows and ids kept).

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("job_events", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}) as batch:
            pass


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("job_events", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": False}) as batch:
            pass
