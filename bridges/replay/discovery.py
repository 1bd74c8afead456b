"""Which recordings a list of paths names, and what identifies their content."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .readers import RecordingError

__all__ = ["content_digest", "find_recordings", "session_id_prefix"]

_CHUNK = 1 << 20


def find_recordings(paths: list[Path]) -> list[Path]:
    """Expand files and folders into recordings: ``.bag`` / ``.mcap`` files and ROS 2 bag folders.

    A folder with a ``metadata.yaml`` is one ROS 2 bag; any other folder is searched
    recursively (sorted, so a nightly run sees the same order). Raises RecordingError for
    a path that does not exist or holds no recording.
    """
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise RecordingError(f"{path}: no such file or folder")
        before = len(found)
        if path.is_dir() and not (path / "metadata.yaml").exists():
            found.extend(_search(path))
        elif path.suffix == ".db3" and (path.parent / "metadata.yaml").exists():
            found.append(path.parent)
        else:
            found.append(path)
        if len(found) == before:
            raise RecordingError(f"{path}: holds no .bag, .mcap or ROS 2 bag folder")
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def _search(folder: Path) -> list[Path]:
    result: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            result.extend([child] if (child / "metadata.yaml").exists() else _search(child))
        elif child.suffix in (".bag", ".mcap"):
            result.append(child)
    return result


def content_digest(recording: Path) -> str:
    """sha256 of the recording's bytes (a bag folder: of its files' names and bytes, sorted)."""
    digest = hashlib.sha256()
    files = sorted(p for p in recording.rglob("*") if p.is_file()) if recording.is_dir() else [recording]
    for file in files:
        if recording.is_dir():
            digest.update(file.relative_to(recording).as_posix().encode("utf-8") + b"\0")
        with open(file, "rb") as handle:
            while block := handle.read(_CHUNK):
                digest.update(block)
    return digest.hexdigest()


def session_id_prefix(digest: str, collection: str) -> str:
    """``rpl_<hash16>``: the content digest mixed with the collection.

    The collection is part of the id so that replaying one file into two collections
    makes two sets of episodes rather than skipping the second as "already stored".
    """
    mixed = hashlib.sha256(f"{digest}\0{collection}".encode()).hexdigest()
    return f"rpl_{mixed[:16]}"
