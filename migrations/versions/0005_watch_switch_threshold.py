"""watches.switch_threshold_pct: the gain a re-plan's new layout must beat to replace the running one (issue 38 §3)

Revision ID: 0005
Revises: 0004

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.add_column(sa.Column("switch_threshold_pct", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("watches") as batch:
        batch.drop_column("switch_threshold_pct")
