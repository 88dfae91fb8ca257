"""Job arrays and sweeps: the ``job_arrays`` table and each element's ``jobs.array_id`` / ``array_index``
(unique together: an index is released as a job at most once).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_arrays",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("user", sa.String(128), nullable=False),
        sa.Column("vc", sa.String(128), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("indices", sa.JSON(), nullable=False),
        sa.Column("sweep", sa.JSON(), nullable=True),
        sa.Column("throttle", sa.Integer(), nullable=True),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("cancelled", sa.JSON(), nullable=False),
        sa.Column("owner_groups", sa.JSON(), nullable=True),
        sa.Column("user_group", sa.String(128), nullable=False),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_job_arrays"),
        sa.UniqueConstraint("id", name="uq_job_arrays_id"),
    )
    op.create_index("ix_job_arrays_user", "job_arrays", ["user"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("array_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch.create_index("ix_jobs_array_id", ["array_id"])
        batch.create_unique_constraint("uq_jobs_array_element", ["array_id", "array_index"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_array_element", type_="unique")
        batch.drop_index("ix_jobs_array_id")
        batch.drop_column("array_index")
        batch.drop_column("array_id")
    op.drop_index("ix_job_arrays_user", "job_arrays")
    op.drop_table("job_arrays")
