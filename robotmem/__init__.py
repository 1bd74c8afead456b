"""robotmem: episodic memory for robots.

>>> from robotmem import Memory
>>> with Memory("/tmp/robot.db") as mem:                        # doctest: +SKIP
...     mem.learn("grip_force=12.5N holds the wet glass", {"params": {"grip_force": {"value": 12.5}}})
...     mem.recall("glass grip", context_filter={"params.grip_force.value": {"$lt": 15}})
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .config import Config
from .errors import (
    ConfigError,
    ConflictError,
    EmbeddingUnavailableError,
    NotFoundError,
    ReadOnlyStoreError,
    RobotMemError,
    StorageError,
    ValidationError,
)
from .models import PERCEPTION_TYPES

if _TYPE_CHECKING:
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
    "ReadOnlyStoreError",
    "RobotMemError",
    "StorageError",
    "ValidationError",
    "__version__",
]


def __getattr__(name: str) -> _Any:
    # Memory pulls in the store, search and embeddings (numpy, ONNX Runtime): loaded on first
    # use, so `robotmem --help` and the MCP server's first answer do not wait for it.
    if name == "Memory":
        from .service import Memory

        return Memory
    raise AttributeError(f"module 'robotmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "Memory"})
