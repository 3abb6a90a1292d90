"""A dispatcher that records what it is asked to send, for tests of what the service sends (the real dispatchers are
tested in tests/workers/)."""

from __future__ import annotations


class Sent:
    """Records each job sent, in order, and whether it was sent ahead of new work (a job taken over)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bool]] = []

    @property
    def jobs(self) -> list[int]:
        """The job ids sent, in order."""
        return [job_id for job_id, _ in self.sent]

    def enqueue(self, job_id: int, ahead: bool = False) -> None:
        self.sent.append((job_id, ahead))

    def waiting(self) -> set[int] | None:
        return set()

    def problem(self) -> str | None:
        return None

    def shutdown(self) -> None:
        return None
