"""Recurring jobs (issue 27): ``schedules`` (cron expression, time zone, policy, the job spec, the
owner and their groups, paused, the next time due) and ``schedule_runs`` (each due time: the job it
submitted, or why none).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("user", sa.String(128), nullable=False),
        sa.Column("owner_groups", sa.JSON(), nullable=False),
        sa.Column("cron", sa.String(256), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("policy", sa.String(16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("next_run_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_schedules")),
        sa.UniqueConstraint("id", name=op.f("uq_schedules_id")),
    )
    op.create_index(op.f("ix_schedules_user"), "schedules", ["user"])
    op.create_table(
        "schedule_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("schedule_id", sa.String(32), nullable=False),
        sa.Column("due_at", sa.Float(), nullable=False),
        sa.Column("fired_at", sa.Float(), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], name=op.f("fk_schedule_runs_schedule_id_schedules"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_runs")),
    )
    op.create_index(op.f("ix_schedule_runs_schedule_id"), "schedule_runs", ["schedule_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_schedule_runs_schedule_id"), table_name="schedule_runs")
    op.drop_table("schedule_runs")
    op.drop_index(op.f("ix_schedules_user"), table_name="schedules")
    op.drop_table("schedules")
