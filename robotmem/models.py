"""Names, limits and small value types shared by every layer."""

from __future__ import annotations

from typing import Final

__all__ = [
    "COLLECTION_MAX_CHARS",
    "CONTEXT_MAX_BYTES",
    "CONTEXT_SECTIONS",
    "DEFAULT_MIN_RELEVANCE",
    "DESCRIPTION_MAX_CHARS",
    "DESCRIPTION_MIN_CHARS",
    "INSIGHT_MAX_CHARS",
    "CONTEXT_MAX_DEPTH",
    "JSON_MAX_DEPTH",
    "DOT_PATH_MAX_CHARS",
    "EPOCH_MAX",
    "EPOCH_MIN",
    "JSON_TEXT_MAX_CHARS",
    "MEMORY_TYPES",
    "PERCEPTION_TYPES",
    "REASON_MAX_CHARS",
    "RECALL_MAX_N",
    "STATUSES",
]

#: Context sections that recall lifts to top-level keys of a hit.
CONTEXT_SECTIONS: Final = ("params", "spatial", "robot", "task")
PERCEPTION_TYPES: Final = ("visual", "tactile", "auditory", "proprioceptive", "procedural")
#: "fact" comes from learn(); "perception" from save_perception().
MEMORY_TYPES: Final = ("fact", "perception")
#: active: searchable. forgotten: retracted by forget(). superseded: merged into another memory.
#: archived: decayed below the archive floor (recall shows it only with min_confidence=0).
STATUSES: Final = ("active", "forgotten", "superseded", "archived")

INSIGHT_MAX_CHARS: Final = 300
DESCRIPTION_MIN_CHARS: Final = 5
DESCRIPTION_MAX_CHARS: Final = 2000
RECALL_MAX_N: Final = 100
#: recall leaves out hits whose relevance (0-1) is below this unless asked for less
#: (chosen on the tuning splits of datasets/retrieval; docs/recall.md).
DEFAULT_MIN_RELEVANCE: Final = 0.5
COLLECTION_MAX_CHARS: Final = 64
REASON_MAX_CHARS: Final = 500
#: Memory.exclusive's name (a replay's is 'rpl_' + 16 hex digits)
CLAIM_NAME_MAX_CHARS: Final = 200
#: A context (learn, update, start_session) or perception metadata, as compact UTF-8 JSON.
#: Recall returns contexts inline, so this bounds a result too; bulk data belongs in a
#: perception's payload, which recall only summarises.
CONTEXT_MAX_BYTES: Final = 64 * 1024
#: JSON arguments given as text: longer text is refused unread (twice the default payload
#: limit, as JSON text of numbers runs about twice its msgpack size).
JSON_TEXT_MAX_CHARS: Final = 32 * 1024 * 1024
#: Deeper JSON is refused before parsing (Python's parser would hit its recursion limit).
JSON_MAX_DEPTH: Final = 64
#: Contexts and metadata nest at most this deep (a value at most this many keys in): they are
#: indexed leaf by leaf, and a robot's context is a few sections of parameters, not a tree.
CONTEXT_MAX_DEPTH: Final = 32
#: A dot path (a filter key, group_by, spatial_sort.field): far longer than any context key
#: path, short enough that an answer echoing it stays small.
DOT_PATH_MAX_CHARS: Final = 1024
#: The times a caller gives (occurred_at, since, until), in epoch seconds: 1970-01-01 to the
#: end of 9999-12-31 UTC, what datetime and time.gmtime can show; 1e300 used to be stored and
#: then crashed every display of the memory.
EPOCH_MIN: Final = 0.0
EPOCH_MAX: Final = 253_402_300_799.0
