"""Shares of a GPU across restarts: a placement row of a share job keeps its share, its slot (which
eighths of the GPU it holds) and, under MIG, its MIG device (``placements.share``, ``share_slot``,
``mig_device``; NULL for whole-GPU placements).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.add_column(sa.Column("share", sa.Float(), nullable=True))
        batch.add_column(sa.Column("share_slot", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("mig_device", sa.String(128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("placements") as batch:
        batch.drop_column("mig_device")
        batch.drop_column("share_slot")
        batch.drop_column("share")
