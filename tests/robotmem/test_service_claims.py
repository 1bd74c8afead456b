"""Memory.exclusive: a name one process holds at a time among all that use a store, on both backends.

The hold must end with its process however that ends (robotmem/store/claims.py): a replay
killed inside an episode leaves its session for the next replay to rewrite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from robotmem import ConflictError, Memory, ValidationError

REPO = Path(__file__).resolve().parents[2]

#: holds NAME in the store at DB, says so, and waits (for stdin, or to be killed)
_HOLDER = """
import sys
from robotmem import Memory
with Memory(sys.argv[1], embedder=None) as mem, mem.exclusive(sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _name() -> str:
    """PostgreSQL's advisory locks span the database, which the tests' schemas share."""
    return f"test-{uuid.uuid4().hex}"


def _holder(db_path: Any, name: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db_path), name], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_name_is_held_by_one_store_user_at_a_time(mem: Memory, db_path: Any) -> None:
    name = _name()
    with Memory(db_path, embedder=None) as other:
        with mem.exclusive(name):
            with pytest.raises(ConflictError) as refused:
                with other.exclusive(name):
                    pytest.fail("held twice")
            assert refused.value.field == "name" and name in refused.value.message
            with other.exclusive(_name()):  # another name is another claim
                pass
        with other.exclusive(name):  # let go at the end of the block
            with pytest.raises(ConflictError):
                with mem.exclusive(name):
                    pass


def test_a_claim_is_let_go_when_its_block_raises(mem: Memory) -> None:
    name = _name()
    with pytest.raises(KeyError):
        with mem.exclusive(name):
            raise KeyError("boom")
    with mem.exclusive(name):
        pass


def test_a_claim_held_by_another_process_refuses_and_ends_with_that_process(mem: Memory, db_path: Any) -> None:
    name = _name()
    holder = _holder(db_path, name)
    try:
        with pytest.raises(ConflictError) as refused:
            with mem.exclusive(name):
                pass
        assert "held by" in refused.value.message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel drops a dead process's flock at once; PostgreSQL ends the lock when it sees the
    # connection gone, a moment later.
    deadline = time.monotonic() + 60
    while True:
        try:
            with mem.exclusive(name):
                break
        except ConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_claim_name_must_be_text(mem: Memory) -> None:
    for bad in ("", 7, "x" * 201):
        with pytest.raises(ValidationError) as refused:
            with mem.exclusive(bad):  # type: ignore[arg-type]
                pass
        assert refused.value.field == "name"


@pytest.mark.sqlite_only
def test_sqlite_leaves_no_claim_file_behind(mem: Memory, db_path: Path) -> None:
    before = set(db_path.parent.iterdir())
    with mem.exclusive(_name()):
        assert len(set(db_path.parent.iterdir()) - before) == 1
    assert set(db_path.parent.iterdir()) == before


def test_stores_in_two_postgresql_schemas_claim_apart(postgres_url: str, module_postgres_url: str) -> None:
    """Advisory locks span a database; two schemas of it are two stores."""
    name = _name()
    with Memory(postgres_url, embedder=None) as one, Memory(module_postgres_url, embedder=None) as two:
        with one.exclusive(name), two.exclusive(name):
            pass
