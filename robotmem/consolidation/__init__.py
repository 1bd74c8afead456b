"""End-of-episode consolidation: merging, reinforcement, decay, proactive recall (docs/consolidation.md)."""

from .episode import Settings, end_session
from .offline import consolidate_ended

__all__ = ["Settings", "consolidate_ended", "end_session"]
