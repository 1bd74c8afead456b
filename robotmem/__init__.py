"""robotmem: episodic memory for robots.

>>> from robotmem import Memory
>>> with Memory("/tmp/robot.db") as mem:                        # doctest: +SKIP
...     mem.learn("grip_force=12.5N holds the wet glass", {"params": {"grip_force": {"value": 12.5}}})
...     mem.recall("glass grip", context_filter={"params.grip_force.value": {"$lt": 15}})
"""

from .config import Config
from .errors import (
    ConfigError,
    ConflictError,
    EmbeddingUnavailableError,
    NotFoundError,
    RobotMemError,
    StorageError,
    ValidationError,
)
from .models import PERCEPTION_TYPES
from .service import Memory

__version__ = "0.1.0"

__all__ = [
    "PERCEPTION_TYPES",
    "Config",
    "ConfigError",
    "ConflictError",
    "EmbeddingUnavailableError",
    "Memory",
    "NotFoundError",
    "RobotMemError",
    "StorageError",
    "ValidationError",
    "__version__",
]
