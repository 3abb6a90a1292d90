"""plan results in their own table (plan_documents), out of the plans rows that history pages read

Revision ID: 0002
Revises: 0001

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "plan_documents",
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("result", DOCUMENT, nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_plan_documents_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("plan_id", name=op.f("pk_plan_documents")),
    )
    op.execute("INSERT INTO plan_documents (plan_id, result) SELECT id, result FROM plans")
    with op.batch_alter_table("plans") as batch:
        batch.drop_column("result")


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("result", DOCUMENT, nullable=True))
    op.execute("UPDATE plans SET result = (SELECT d.result FROM plan_documents d WHERE d.plan_id = plans.id)")
    with op.batch_alter_table("plans") as batch:
        batch.alter_column("result", existing_type=DOCUMENT, nullable=False)
    op.drop_table("plan_documents")
