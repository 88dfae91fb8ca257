"""Accounting: what each job attempt used (``job_usage``), and the owner's group for fair share
(``jobs.user_group``). The fair-share ledger is derived from ``job_usage`` at start.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("user_group", sa.String(128), nullable=False, server_default=""))
    op.create_table(
        "job_usage",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", name="fk_job_usage_job_id_jobs"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(128), nullable=False),
        sa.Column("user_group", sa.String(128), nullable=False, server_default=""),
        sa.Column("vc", sa.String(128), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False, server_default="1.0"),
        sa.Column("gpu_types", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("cpu_seconds", sa.Float(), nullable=True),
        sa.Column("peak_memory_mb", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_job_usage"),
    )
    op.create_index("ix_job_usage_job_id", "job_usage", ["job_id"])
    op.create_index("ix_job_usage_user", "job_usage", ["user"])
    op.create_index("ix_job_usage_ended_at", "job_usage", ["ended_at"])


def downgrade() -> None:
    op.drop_table("job_usage")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("user_group")
