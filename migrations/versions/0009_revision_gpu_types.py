"""cluster_revisions.gpu_types: the pools' GPU types, so the cluster list reads no inventory (issue 37 item 4)

Revision ID: 0009
Revises: 0008

"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("cluster_revisions") as batch:
        batch.add_column(sa.Column("gpu_types", DOCUMENT, nullable=False, server_default="[]"))
    revisions = sa.table(
        "cluster_revisions", sa.column("id", sa.Integer), sa.column("spec", DOCUMENT), sa.column("gpu_types", DOCUMENT)
    )
    bind = op.get_bind()
    for rev_id, spec in bind.execute(sa.select(revisions.c.id, revisions.c.spec)).all():
        pools: list[dict[str, Any]] = (spec or {}).get("pools", [])
        types = list(dict.fromkeys(str(p.get("gpu", "")) for p in pools))
        bind.execute(sa.update(revisions).where(revisions.c.id == rev_id).values(gpu_types=types))


def downgrade() -> None:
    with op.batch_alter_table("cluster_revisions") as batch:
        batch.drop_column("gpu_types")
