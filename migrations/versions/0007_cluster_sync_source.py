"""clusters.sync_source, last_sync, last_synced_at: the scheduler a cluster's inventory is synced from (issue 34 §1)

Revision ID: 0007
Revises: 0006

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(
            sa.Column("sync_source", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True)
        )
        batch.add_column(sa.Column("last_sync", sa.String(length=256), nullable=False, server_default=""))
        batch.add_column(sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("last_synced_at")
        batch.drop_column("last_sync")
        batch.drop_column("sync_source")
