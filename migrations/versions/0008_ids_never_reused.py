"""ids never reused on SQLite: every id table recreated with AUTOINCREMENT (issue 37 item 6)

SQLite gives a new row max(id)+1, so deleting the newest job handed its id to the next one; AUTOINCREMENT keeps
the largest id ever given in sqlite_sequence (https://sqlite.org/autoinc.html). PostgreSQL's sequences never
reuse an id: nothing to do there.

Revision ID: 0008
Revises: 0007

"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table keyed by an integer id (store.models.Row); plan_documents is keyed by its plan's id.
TABLES = (
    "api_tokens",
    "change_generations",
    "clusters",
    "gpu_types",
    "models",
    "workloads",
    "acceptance_tests",
    "calibrations",
    "cluster_revisions",
    "model_versions",
    "watches",
    "jobs",
    "plans",
    "measurements",
)


def _recreate(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        # Recreate copies the rows (their ids kept; sqlite_sequence starts at the largest); the environment turns
        # foreign keys off, so dropping the old table cascades nowhere.
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass


def upgrade() -> None:
    _recreate(True)


def downgrade() -> None:
    _recreate(False)
