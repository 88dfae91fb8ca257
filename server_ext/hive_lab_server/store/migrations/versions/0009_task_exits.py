"""The current attempt's ended tasks (``jobs.task_exits``: task -> exit code): a job's completion policy
counts them, and a restart must know which of its tasks are over (not running, yet not lost).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("task_exits", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("task_exits")
