"""change_generations: the counter a SQLite writer bumps when a commit can alter a cached read (store.changes)

Revision ID: 0004
Revises: 0003

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "change_generations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_generations")),
    )
    op.bulk_insert(table, [{"id": 1, "n": 0}])


def downgrade() -> None:
    op.drop_table("change_generations")
