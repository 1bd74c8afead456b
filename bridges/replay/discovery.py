"""Which recordings a list of paths names, and what identifies their content."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

import yaml

from .readers import RecordingError, without_metadata

__all__ = ["content_digest", "find_recordings", "legacy_digest", "session_id_prefix"]

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
        elif path.suffix == ".db3":
            raise RecordingError(without_metadata(path.parent))
        else:
            found.append(path)
        if len(found) == before:
            storage = min(path.rglob("*.db3"), default=None)
            if storage is not None:  # a bag folder that lost its metadata.yaml, not "no recording"
                raise RecordingError(without_metadata(storage.parent))
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
    """sha256 of the recording's bytes (a bag folder: the names and bytes of the storage files its
    metadata.yaml names, sorted).

    Only the recorded data: a bag folder's other files (an operator's notes, a plot,
    .DS_Store) and the wording of its metadata.yaml (re-serialised by a tool) do not make it
    another recording; hashing them made a re-run store everything again."""
    return _digest(recording, _bag_files(recording, with_metadata=False) if recording.is_dir() else [recording])


def legacy_digest(recording: Path) -> str | None:
    """A bag folder's digest as replay computed it before content_digest left metadata.yaml out
    (every file's name and bytes; here only metadata.yaml and the storage files, which is the same
    for a folder holding nothing else): episodes a store holds under it are found by it. None for a file."""
    return _digest(recording, _bag_files(recording, with_metadata=True)) if recording.is_dir() else None


def _digest(recording: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for file in files:
        if recording.is_dir():
            digest.update(file.relative_to(recording).as_posix().encode("utf-8") + b"\0")
        with open(file, "rb") as handle:
            while block := handle.read(_CHUNK):
                digest.update(block)
    return digest.hexdigest()


def _bag_files(folder: Path, *, with_metadata: bool) -> list[Path]:
    """The storage files metadata.yaml names (``relative_file_paths``, as rosbags reads them: by
    file name inside the folder), sorted, and metadata.yaml itself when asked; every file of the
    folder when it names none."""
    everything = sorted(p for p in folder.rglob("*") if p.is_file())
    metadata = folder / "metadata.yaml"
    try:
        info = yaml.safe_load(metadata.read_text(encoding="utf-8"))["rosbag2_bagfile_information"]
        named = {folder / PurePosixPath(str(name)).name for name in info["relative_file_paths"]}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return everything  # rosbags will say what is wrong with it
    if not named:
        return everything
    return [p for p in everything if p in named or (with_metadata and p == metadata)]


def session_id_prefix(digest: str, collection: str) -> str:
    """``rpl_<hash16>``: the content digest mixed with the collection.

    The collection is part of the id so that replaying one file into two collections
    makes two sets of episodes rather than skipping the second as "already stored".
    """
    mixed = hashlib.sha256(f"{digest}\0{collection}".encode()).hexdigest()
    return f"rpl_{mixed[:16]}"
