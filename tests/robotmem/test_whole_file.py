"""whole_file.written_whole: which temporary files beside a destination the next write removes."""

import fcntl
import os
import time
from pathlib import Path

import pytest

from robotmem.whole_file import written_whole


def _leftover(directory: Path, name: str, *, age_s: float = 3600.0) -> Path:
    path = directory / name
    path.write_text('{"kind": "memory"}\n')
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def _write(target: Path, text: str = "new\n") -> None:
    with written_whole(target) as out:
        out.write(text)


def test_an_unlocked_old_leftover_of_the_same_destination_is_removed(tmp_path: Path):
    left = _leftover(tmp_path, ".backup.jsonl.0123abcd.tmp")
    _write(tmp_path / "backup.jsonl")
    assert not left.exists()
    assert (tmp_path / "backup.jsonl").read_text() == "new\n"


def test_a_leftover_another_live_writer_holds_locked_is_kept(tmp_path: Path):
    left = _leftover(tmp_path, ".backup.jsonl.0123abcd.tmp")
    fd = os.open(left, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running export holds its own
        _write(tmp_path / "backup.jsonl")
        assert left.exists()
    finally:
        os.close(fd)


def test_a_writer_holds_its_own_temporary_file_locked_while_it_writes(tmp_path: Path):
    target = tmp_path / "backup.jsonl"
    with written_whole(target) as out:
        out.write("partial\n")
        out.flush()
        (temp,) = tmp_path.glob(".backup.jsonl.*.tmp")
        then = time.time() - 3600
        os.utime(temp, (then, then))  # even when it looks old, a second write must not take it
        _write(tmp_path / "backup.jsonl", "other\n")
        assert temp.exists()
        out.write("rest\n")
    assert target.read_text() == "partial\nrest\n"


@pytest.mark.parametrize("name", [
    ".other.jsonl.0123abcd.tmp",       # another destination's
    ".backup.jsonl.0123abcd.tmp.keep",  # not the pattern
    ".backup.jsonl.XYZ.tmp",           # not one of ours
    "backup.jsonl.0123abcd.tmp",       # not hidden
])
def test_files_that_are_not_this_destinations_temporaries_are_kept(tmp_path: Path, name: str):
    left = _leftover(tmp_path, name)
    _write(tmp_path / "backup.jsonl")
    assert left.exists()


def test_a_leftover_written_moments_ago_is_kept(tmp_path: Path):
    """A new temporary file is unlocked for microseconds between its creation and its lock."""
    left = _leftover(tmp_path, ".backup.jsonl.0123abcd.tmp", age_s=1.0)
    _write(tmp_path / "backup.jsonl")
    assert left.exists()


def test_a_symlink_with_the_pattern_is_not_followed_or_removed(tmp_path: Path):
    victim = _leftover(tmp_path, "precious.txt")
    link = tmp_path / ".backup.jsonl.0123abcd.tmp"
    link.symlink_to(victim)
    _write(tmp_path / "backup.jsonl")
    assert link.is_symlink() and victim.exists()
