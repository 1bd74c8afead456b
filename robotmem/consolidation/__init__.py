"""End-of-episode consolidation (see docs/consolidation.md)."""

from .episode import end_session

__all__ = ["end_session"]
