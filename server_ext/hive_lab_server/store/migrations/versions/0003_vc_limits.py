"""Per-user limits of each VC set by admins at run time (vc_limits), and each job's owner's groups at
submit (jobs.owner_groups), so a restart applies the same group limits to the jobs it queues again.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "vc_limits",
        sa.Column("vc", sa.String(128), nullable=False),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("by", sa.String(128), nullable=False),
        sa.PrimaryKeyConstraint("vc", name=op.f("pk_vc_limits")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("owner_groups", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("owner_groups")
    op.drop_table("vc_limits")
