"""A file that is replaced only once its new contents are written whole (export's backups).

``robotmem export backup.jsonl`` over last night's backup must never leave half a file: a
backup stopped by SIGTERM from cron, Ctrl-C or a full disk would otherwise destroy the good
one it was replacing. The new contents go to a temporary file beside the destination, are
flushed to disk and renamed onto it (atomic on POSIX within one file system), then the
directory is synced. Written here rather than taken from a library: ``atomicwrites``, the
usual one, is archived, and the rules a backup needs (keep the old file's mode and owner,
write symlinks and devices in place) are a few lines.

A writer holds an exclusive ``flock`` on its temporary file, which the kernel releases when the
process dies, SIGKILL included. So the next write to the same destination can tell a temporary
file left by a killed export (unlocked) from one another export is writing now (locked), and
removes the first kind: a nightly backup killed by the OOM killer leaves at most one stray
file, not one more every night.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import ValidationError

__all__ = ["opened_text", "written_whole"]

log = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # Windows: no flock, so leftovers cannot be told from live files and stay
    fcntl = None  # type: ignore[assignment]

#: A leftover is removed only when unlocked and untouched this long: a new temporary file is
#: locked microseconds after it is created, so this only guards against a clock that jumped.
_LEFTOVER_AGE_S = 60.0


def opened_text(path: Path, mode: str, errors: str = "strict") -> IO[str]:
    """``path`` opened as UTF-8 text; a failure is a ValidationError naming the path."""
    try:
        return path.open(mode, encoding="utf-8", errors=errors)
    except OSError as exc:
        raise ValidationError(f"cannot open {path}: {exc.strerror or exc}", field="path") from exc


@contextmanager
def written_whole(target: Path) -> Iterator[IO[str]]:
    """A text stream whose contents replace ``target`` when the block ends without an exception.

    A regular file (or no file yet) is written as a temporary file beside it, so the previous
    file stays whole until the new one is: a write stopped half-way leaves it as it was and
    removes the temporary file (any exception, Ctrl-C; not SIGKILL or a power cut, which leave a
    ``.NAME.*.tmp`` beside it, removed by the next write to ``target``). A symlink, a device or a pipe (``/dev/stdout``) is written in
    place, as is a writable file in a folder where this user cannot create one (with a warning).
    """
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise ValidationError(f"cannot open {target}: {exc.strerror or exc}", field="path") from exc
    if st is not None and not stat.S_ISREG(st.st_mode):
        with opened_text(target, "w") as out:  # a symlink, a device, a pipe, a directory (refused by open)
            yield out
        return
    if st is not None and not os.access(target, os.W_OK):
        # As open() would: replacing it by rename would overwrite a file its owner made read-only.
        raise ValidationError(f"cannot open {target}: Permission denied", field="path")
    _remove_leftovers(target)
    try:
        fd, temp = _temp_beside(target)
    except OSError as exc:
        if st is None or not isinstance(exc, PermissionError):
            raise ValidationError(f"cannot open {target}: {exc.strerror or exc}", field="path") from exc
        log.warning("%s: cannot create a temporary file beside it (%s): writing it in place, so a write "
                    "stopped half-way leaves it cut short", target, exc.strerror or exc)
        with opened_text(target, "w") as out:
            yield out
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            if st is not None:
                _same_owner_and_mode(out.fileno(), st)
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException as exc:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ValidationError(f"cannot write {target}: {exc.strerror or exc}", field="path") from exc
        raise
    _sync_directory(target.parent)


def _temp_beside(target: Path) -> tuple[int, str]:
    """A new file in the destination's directory (os.replace renames only within one file system),
    created as open() would create the destination: mode 0666 less the umask."""
    for _ in range(100):
        temp = os.path.join(target.parent, f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a file system without locks: the file is still written, only not swept
                pass
        return fd, temp
    raise FileExistsError(f"no free temporary name beside {target}")


def _remove_leftovers(target: Path) -> None:
    """Remove the temporary files an earlier write to ``target`` left when it was killed: those
    no live process holds locked. Best effort: a file that cannot be opened or removed stays."""
    if fcntl is None:
        return
    pattern = re.compile(r"\." + re.escape(target.name) + r"\.[0-9a-f]{8}\.tmp")
    try:
        names = [e for e in os.scandir(target.parent) if pattern.fullmatch(e.name)]
    except OSError:
        return
    for entry in names:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or abs(time.time() - st.st_mtime) < _LEFTOVER_AGE_S:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while its writer is alive
            os.unlink(entry.path)
            log.info("%s: removed %s, left by an earlier write that was killed", target, entry.name)
        except OSError:
            continue
        finally:
            os.close(fd)


def _same_owner_and_mode(fd: int, st: os.stat_result) -> None:
    """The file replacing an existing one keeps its permissions (and its owner and group, where
    this user may give them: root, or a group it is in)."""
    try:
        os.chmod(fd, stat.S_IMODE(st.st_mode))
    except (OSError, NotImplementedError):
        pass
    if hasattr(os, "fchown"):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass


def _sync_directory(directory: Path) -> None:
    """The rename on disk too (POSIX: a directory is synced through a descriptor of its own)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
