"""acceptance_tests: a pool's nccl-tests and GEMM benchmark outputs, parsed, which the calibration starts from
(issue 33 §1)

Revision ID: 0006
Revises: 0005

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "acceptance_tests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=32), nullable=False),
        sa.Column("figures", DOCUMENT, nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("note", sa.String(length=2000), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name=op.f("fk_acceptance_tests_cluster_id_clusters"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acceptance_tests")),
    )
    op.create_index(op.f("ix_acceptance_tests_cluster_id"), "acceptance_tests", ["cluster_id"])
    op.create_index(op.f("ix_acceptance_tests_created_at"), "acceptance_tests", ["created_at"])


def downgrade() -> None:
    op.drop_table("acceptance_tests")
