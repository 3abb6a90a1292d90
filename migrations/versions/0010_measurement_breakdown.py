"""measurements.breakdown: a profiler trace's per-rank, per-step breakdown stored with its measurement (issue 54 §2)

Revision ID: 0010
Revises: 0009

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# store/models.py NullableDocument: JSON null is SQL NULL
NULLABLE_DOCUMENT = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(sa.Column("breakdown", NULLABLE_DOCUMENT, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("breakdown")
