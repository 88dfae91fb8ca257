"""A job's stop intent (cancel, preempt, failed, lost) and its reason, stored before it is acknowledged
so a restart finishes the stop instead of forgetting it.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("stop_intent", sa.String(16), nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("stop_reason")
        batch.drop_column("stop_intent")
