"""End-of-episode consolidation: merging, reinforcement, decay, proactive recall (docs/consolidation.md)."""

from .episode import end_session
from .offline import consolidate_ended

__all__ = ["consolidate_ended", "end_session"]
