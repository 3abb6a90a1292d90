"""measurements against plans and per-cluster calibrations; jobs and plans record the calibration they used

Revision ID: 0003
Revises: 0002

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calibrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("constants", DOCUMENT, nullable=False),
        sa.Column("report", DOCUMENT, nullable=False),
        sa.Column("measurements", sa.Integer(), nullable=False),
        sa.Column("change", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_calibrations_cluster_id_clusters"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibrations")),
        sa.UniqueConstraint("cluster_id", "number", name=op.f("uq_calibrations_cluster_id_number")),
    )
    op.create_index(op.f("ix_calibrations_cluster_id"), "calibrations", ["cluster_id"])
    op.create_index(op.f("ix_calibrations_created_at"), "calibrations", ["created_at"])
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("config", DOCUMENT, nullable=False),
        sa.Column("figures", DOCUMENT, nullable=False),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("predicted_step_time_s", sa.Float(), nullable=True),
        sa.Column("peak_allocated_gb", sa.Float(), nullable=True),
        sa.Column("predicted_memory_gb", sa.Float(), nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_measurements_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_measurements_cluster_id_clusters"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurements")),
    )
    op.create_index(op.f("ix_measurements_plan_id"), "measurements", ["plan_id"])
    op.create_index(op.f("ix_measurements_cluster_id"), "measurements", ["cluster_id"])
    op.create_index(op.f("ix_measurements_created_at"), "measurements", ["created_at"])
    for table in ("jobs", "plans"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("calibration_id", sa.Integer(), nullable=True))
            batch.create_foreign_key(
                op.f(f"fk_{table}_calibration_id_calibrations"),
                "calibrations",
                ["calibration_id"],
                ["id"],
                ondelete="SET NULL",
            )


def downgrade() -> None:
    for table in ("plans", "jobs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"fk_{table}_calibration_id_calibrations"), type_="foreignkey")
            batch.drop_column("calibration_id")
    op.drop_table("measurements")
    op.drop_table("calibrations")
