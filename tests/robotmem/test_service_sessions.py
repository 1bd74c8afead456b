import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from robotmem import ConflictError, Memory, NotFoundError, ValidationError


def test_a_session_groups_memories_into_a_timeline(mem: Memory, clock):
    sid = mem.start_session(context={"task": {"name": "dock"}})["session_id"]
    a = mem.learn("approach was too fast", session_id=sid)["memory_id"]
    clock.advance(5)
    b = mem.save_perception("lidar scan at the dock", "visual", session_id=sid)["memory_id"]
    timeline = mem.session_timeline(sid)
    assert timeline["session"]["context"] == {"task": {"name": "dock"}}
    assert [m["id"] for m in timeline["memories"]] == [a, b]


def test_end_session_records_the_outcome_and_reports_already_ended(mem: Memory, clock):
    sid = mem.start_session()["session_id"]
    mem.learn("one thing learned", session_id=sid)
    clock.advance(12.5)
    summary = mem.end_session(sid, outcome_score=0.75)
    assert summary["status"] == "ended" and summary["duration_s"] == 12.5 and summary["memories"] == 1
    assert mem.get_session(sid)["outcome_score"] == 0.75
    again = mem.end_session(sid, outcome_score=0.1)
    assert again["status"] == "already_ended" and again["duration_s"] == 12.5
    assert mem.get_session(sid)["outcome_score"] == 0.75


@pytest.mark.parametrize("score", [2, -0.5, "high", float("nan")])
def test_end_session_rejects_a_score_outside_zero_to_one(mem: Memory, score):
    sid = mem.start_session()["session_id"]
    with pytest.raises(ValidationError) as info:
        mem.end_session(sid, outcome_score=score)
    assert info.value.field == "outcome_score"
    assert mem.get_session(sid)["status"] == "open"


def test_end_of_an_unknown_session_is_not_found(mem: Memory):
    with pytest.raises(NotFoundError):
        mem.end_session("ses_unknown")


def test_start_session_with_an_explicit_id_is_idempotent(mem: Memory):
    first = mem.start_session(session_id="rpl_abc_1")
    second = mem.start_session(session_id="rpl_abc_1")
    assert first["status"] == "started" and second["status"] == "exists"
    with pytest.raises(ConflictError):
        mem.start_session(collection="other", session_id="rpl_abc_1")


@pytest.mark.parametrize("suffix", ["\n", "\r", " ", "\n\n"])
def test_a_session_id_or_collection_with_trailing_whitespace_is_refused_not_a_second_name(mem: Memory, suffix):
    # `$` matched before a final newline: "ses_run7\n" was a session beside "ses_run7", and a fact
    # learned in "kitchen\n" was missing from recall in "kitchen"
    with pytest.raises(ValidationError) as info:
        mem.start_session(session_id="ses_run7" + suffix)
    assert info.value.field == "session_id"
    with pytest.raises(ValidationError) as info:
        mem.learn("cup is on the left shelf", collection="kitchen" + suffix)
    assert info.value.field == "collection"
    with pytest.raises(ValidationError) as info:
        mem.recall("cup", collection="kitchen" + suffix)
    assert info.value.field == "collection"
    assert mem.list_sessions() == [] and mem.stats()["memories"] == 0


def test_list_sessions_filters_by_status(mem: Memory):
    open_id = mem.start_session()["session_id"]
    ended_id = mem.start_session()["session_id"]
    mem.end_session(ended_id)
    assert [s["session_id"] for s in mem.list_sessions(status="open")] == [open_id]
    assert [s["session_id"] for s in mem.list_sessions(status="ended")] == [ended_id]


def test_list_sessions_lists_every_session_unless_given_a_limit(mem: Memory, clock):
    # It once stopped at 100 without saying so, while stats counted them all.
    ids = []
    for _ in range(105):
        ids.append(mem.start_session()["session_id"])
        clock.advance(1)
    listed = mem.list_sessions()
    assert len(listed) == mem.stats()["sessions"] == 105
    assert [s["session_id"] for s in listed] == ids[::-1]  # newest first
    assert [s["session_id"] for s in mem.list_sessions(limit=3)] == ids[:-4:-1]
    assert len(mem.list_sessions(limit=2**63 - 1)) == 105


def test_pages_after_a_cursor_join_into_the_whole_listing_and_hold_while_sessions_start(mem: Memory, clock):
    # Ten sessions of one instant (ties broken by id) among others; the web view pages through a
    # fleet's thousands of episodes with it, and only saw the newest 500 before.
    ids = []
    for i in range(23):
        ids.append(mem.start_session(collection="fleet" if i % 5 else "other")["session_id"])
        if not 6 <= i < 16:
            clock.advance(1)
    whole = [s["session_id"] for s in mem.list_sessions(collection="fleet")]
    assert len(whole) == 18
    pages: list[str] = []
    after = None
    while True:
        page = mem.list_sessions(collection="fleet", limit=4, after=after)
        if not page:
            break
        pages += [s["session_id"] for s in page]
        after = (page[-1]["started_at"], page[-1]["session_id"])
        mem.start_session(collection="fleet")  # newer ones start meanwhile: the pages go on where they were
        clock.advance(1)
    assert pages == whole
    assert mem.list_sessions(after=(mem.get_session(ids[0])["started_at"], ids[0])) == []


def test_list_sessions_keeps_to_one_robot_and_pages_through_its_sessions(mem: Memory, clock):
    robots = ["arm-1", "arm-2", " arm-1 ", "ARM-1", 7, None, "arm-1"]
    ids = {}
    for i in range(21):
        robot = robots[i % len(robots)]
        context = {} if robot is None else {"robot": {"id": robot}}
        ids[mem.start_session(context=context)["session_id"]] = robot
        clock.advance(1)
    mem.start_session(context={"robot": {"name": "arm-1"}})  # no id in it
    mine = [sid for sid, robot in reversed(ids.items()) if robot == "arm-1"]
    assert [s["session_id"] for s in mem.list_sessions(robot="arm-1")] == mine and len(mine) == 6
    page = mem.list_sessions(robot="arm-1", limit=4)
    rest = mem.list_sessions(robot="arm-1", after=(page[-1]["started_at"], page[-1]["session_id"]))
    assert [s["session_id"] for s in page + rest] == mine
    assert [s["session_id"] for s in mem.list_sessions(robot=" arm-1 ")] == [
        sid for sid, robot in reversed(ids.items()) if robot == " arm-1 "]  # as written, not stripped
    assert mem.list_sessions(robot="arm-9") == [] and mem.list_sessions(robot="7") == []  # a string id only


@pytest.mark.parametrize("robot", ["", 7, "a\x00b", "\ud800"])
def test_list_sessions_refuses_a_robot_that_is_no_robot_id(mem: Memory, robot):
    with pytest.raises(ValidationError) as err:
        mem.list_sessions(robot=robot)
    assert err.value.field == "robot"


@pytest.mark.parametrize("after", [("x", "ses_1a2b3c4d5e6f"), (float("nan"), "ses_1a2b3c4d5e6f"), (1.0, "no id"),
                                   (True, "ses_1a2b3c4d5e6f"), "ses_1a2b3c4d5e6f", (1.0,), {"a": 1}])
def test_list_sessions_refuses_a_cursor_it_did_not_give(mem: Memory, after):
    with pytest.raises(ValidationError) as err:
        mem.list_sessions(after=after)
    assert err.value.field == "after"


@pytest.mark.parametrize("limit", [0, -1, 2**63, 2.5, "10", True])
def test_list_sessions_refuses_a_limit_that_is_not_a_count(mem: Memory, limit):
    with pytest.raises(ValidationError) as err:
        mem.list_sessions(limit=limit)
    assert err.value.field == "limit"


def test_forget_is_soft_and_reports_unknown_ids(mem: Memory):
    mid = mem.learn("temporary note")["memory_id"]
    assert mem.forget(mid, "test")["status"] == "forgotten"
    assert mem.forget(mid, "again")["status"] == "already_forgotten"
    for bad, error in ((0, ValidationError), (-1, ValidationError), (mid + 100, NotFoundError)):
        with pytest.raises(error) as info:
            mem.forget(bad, "x")
        assert info.value.field == "memory_id"
    with pytest.raises(ValidationError) as info:
        mem.forget(mid, "")
    assert info.value.field == "reason"


def test_update_replaces_content_and_context_and_refuses_forgotten(mem: Memory):
    mid = mem.learn("speed 0.5 works", {"params": {"speed": 0.5}})["memory_id"]
    mem.update(mid, "speed 0.4 works", {"params": {"speed": 0.4}})
    record = mem.get(mid)
    assert record["content"] == "speed 0.4 works" and record["params"] == {"speed": 0.4}
    assert mem.recall("", context_filter={"params.speed": 0.5})["count"] == 0
    assert mem.learn("speed 0.5 works", {"params": {"speed": 0.5}})["status"] == "created"
    mem.forget(mid, "obsolete")
    with pytest.raises(ConflictError):
        mem.update(mid, "speed 0.3 works")
    with pytest.raises(ValidationError) as info:
        mem.update(mid, "")
    assert info.value.field == "new_content"


def test_update_to_the_text_and_context_of_another_live_fact_is_a_conflict_naming_it(mem: Memory):
    """learn keeps one live copy per fact text + context; update keeps the same rule, the same way on
    both stores (PostgreSQL's unique index never gets to refuse it as a storage failure)."""
    c = mem.learn("the dock is behind the shelf")["memory_id"]
    d = mem.learn("the lidar is dirty", {"place": "dock"})["memory_id"]
    before = mem.get(d)
    with pytest.raises(ConflictError) as info:
        mem.update(d, "the dock is behind the shelf", {})
    assert info.value.field == "new_content"
    assert f"memory {c} already says this" in info.value.message and f"memory {d} was not changed" in info.value.message
    with pytest.raises(ConflictError):  # the kept context gives the same hash as well
        mem.update(mem.learn("the lidar is clean")["memory_id"], "the dock is behind the shelf")
    assert mem.get(d) == before  # nothing changed
    assert mem.learn("the lidar is dirty", {"place": "dock"}) == {"memory_id": d, "status": "duplicate"}
    assert mem.learn("the dock is behind the shelf") == {"memory_id": c, "status": "duplicate"}
    assert [h["id"] for h in mem.recall("shelf")["results"]] == [c]


def test_update_may_repeat_its_own_text_or_that_of_a_fact_that_is_not_live_or_elsewhere(mem: Memory):
    c = mem.learn("the dock is behind the shelf")["memory_id"]
    assert mem.update(c, "the dock is behind the shelf")["status"] == "updated"  # itself
    d = mem.learn("the lidar is dirty")["memory_id"]
    # Another context, another collection, or a perception: not the same fact.
    assert mem.update(d, "the dock is behind the shelf", {"place": "dock"})["status"] == "updated"
    e = mem.learn("the lidar is dirty", collection="other")["memory_id"]
    assert mem.update(e, "the dock is behind the shelf")["status"] == "updated"
    p = mem.save_perception("camera saw the dock", "visual")["memory_id"]
    assert mem.update(p, "the dock is behind the shelf")["status"] == "updated"
    # A forgotten copy is not live: its text may be written again.
    mem.forget(c, "moved")
    f = mem.learn("the lift is slow")["memory_id"]
    assert mem.update(f, "the dock is behind the shelf")["status"] == "updated"
    assert mem.learn("the dock is behind the shelf") == {"memory_id": f, "status": "duplicate"}


def test_update_with_a_new_context_keeps_the_outcome_end_session_wrote(mem: Memory):
    sid = mem.start_session()["session_id"]
    a = mem.learn("push factor one worked", {"params": {"push_factor": 1.0}}, session_id=sid)["memory_id"]
    mem.end_session(sid, 0.9)
    assert mem.get(a)["context"] == {"params": {"push_factor": 1.0}, "episode": {"outcome": 0.9}}
    mem.update(a, "push factor one worked (typo fixed)", {"params": {"push_factor": 1.0}, "note": "checked"})
    # The caller's keys replace the old ones; the episode's score is the system's and stays.
    assert mem.get(a)["context"] == {"params": {"push_factor": 1.0}, "note": "checked", "episode": {"outcome": 0.9}}
    (group,) = mem.outcome_stats("params.push_factor")["groups"]
    assert (group["value"], group["count"], group["mean_outcome"]) == (1.0, 1, 0.9)
    # The hash is still that of the context the caller gave, as after end_session.
    again = mem.learn("push factor one worked (typo fixed)", {"params": {"push_factor": 1.0}, "note": "checked"})
    assert again == {"memory_id": a, "status": "duplicate"}
    # Other keys of the caller's own episode object are kept beside the outcome.
    mem.update(a, "push factor one worked once more", {"episode": {"attempt": 3}})
    assert mem.get(a)["context"] == {"episode": {"attempt": 3, "outcome": 0.9}}


def test_update_without_a_context_hashes_the_callers_context_not_the_outcome_end_session_wrote(mem: Memory):
    ctx = {"task": {"name": "pick"}, "params": {"grip": 5}}
    sid = mem.start_session()["session_id"]
    a = mem.learn("grip the mug handle with five newtons", ctx, session_id=sid)["memory_id"]
    mem.end_session(sid, 0.9)
    mem.update(a, "grip the mug handle with six newtons")
    assert mem.get(a)["context"] == {**ctx, "episode": {"outcome": 0.9}}  # the score stays
    assert mem.learn("grip the mug handle with six newtons", ctx) == {"memory_id": a, "status": "duplicate"}
    # The caller's own empty episode object, and an outcome the caller wrote itself, are told
    # apart from end_session's by the memory's hash.
    sid = mem.start_session()["session_id"]
    b = mem.learn("the tray tilts when loaded", {"episode": {}}, session_id=sid)["memory_id"]
    c = mem.learn("the tray tilts when empty", {"episode": {"outcome": 0.4}}, session_id=sid)["memory_id"]
    mem.end_session(sid, 0.4)
    mem.update(b, "the tray tilts when fully loaded")
    mem.update(c, "the tray tilts when fully empty")
    assert mem.learn("the tray tilts when fully loaded", {"episode": {}})["memory_id"] == b
    assert mem.learn("the tray tilts when fully empty", {"episode": {"outcome": 0.4}})["memory_id"] == c
    assert mem.learn("the tray tilts when fully loaded")["status"] == "created"


def test_update_keeps_an_outcome_the_new_context_gives_or_an_episode_that_is_not_an_object(mem: Memory):
    sid = mem.start_session()["session_id"]
    a = mem.learn("gripper slipped on the wet cup", session_id=sid)["memory_id"]
    mem.end_session(sid, 0.2)
    mem.update(a, "gripper slipped on the wet mug", {"episode": {"outcome": 0.6}})
    assert mem.get(a)["context"] == {"episode": {"outcome": 0.6}}
    mem.update(a, "gripper slipped on the wet glass", {"episode": "mine"})
    assert mem.get(a)["context"] == {"episode": "mine"}
    # Without a new context the stored one is kept whole, as before.
    mem.update(a, "gripper slipped on the wet bowl")
    assert mem.get(a)["context"] == {"episode": "mine"}


def test_update_adds_no_outcome_for_a_session_without_a_score_or_without_a_session(mem: Memory):
    sid = mem.start_session()["session_id"]
    a = mem.learn("the dock light flickers", {"place": "dock"}, session_id=sid)["memory_id"]
    mem.end_session(sid)  # ended without an outcome score
    mem.update(a, "the dock light flickers at night", {"place": "dock"})
    assert mem.get(a)["context"] == {"place": "dock"}
    b = mem.learn("the lift is slow", {"place": "lift"})["memory_id"]
    mem.update(b, "the lift is very slow", {"place": "lift"})
    assert mem.get(b)["context"] == {"place": "lift"}


def test_robot_id_of_the_session_alone_does_not_keep_two_robots_facts_apart(mem: Memory):
    """What docs/fleet.md tells a fleet: robot.id goes in each memory's own context."""
    r1, r2 = (mem.start_session(context={"robot": {"id": r}})["session_id"] for r in ("r1", "r2"))
    first = mem.learn("the dock door sticks when wet", session_id=r1)
    assert mem.learn("the dock door sticks when wet", session_id=r2) == {**first, "status": "duplicate"}
    assert mem.get(first["memory_id"])["context"] == {}  # not copied from the session
    near = mem.learn("The dock door sticks when wet!", session_id=r2)["memory_id"]
    mem.end_session(r1)
    assert mem.end_session(r2)["reinforced"] == 1 and mem.get(near)["status"] == "superseded"
    assert mem.recall("dock door", context_filter={"robot.id": "r2"})["count"] == 0
    # Named in each memory's context, the two robots' equal facts stay two memories.
    r3, r4 = (mem.start_session(context={"robot": {"id": r}})["session_id"] for r in ("r3", "r4"))
    ids = {mem.learn("the lift is slow", context={"robot": {"id": r}}, session_id=s)["memory_id"]
           for r, s in (("r3", r3), ("r4", r4))}
    for sid in (r3, r4):
        mem.end_session(sid)
    assert len(ids) == 2 and {mem.get(i)["status"] for i in ids} == {"active"}


def test_session_overviews_count_active_memories_and_find_the_last_live_summary(mem: Memory, clock):
    sid = mem.start_session()["session_id"]
    wrong = mem.learn("the dock is on the left of the charger", session_id=sid)["memory_id"]
    mem.learn("approach the dock slowly below 0.1 m/s", session_id=sid)
    mem.save_perception("lidar scan at the dock", "visual", session_id=sid)
    mem.save_perception("first summary", "procedural", session_id=sid)
    clock.advance(1)
    last = mem.save_perception("final summary", "procedural", session_id=sid, metadata={"task": {"name": "dock"}})
    clock.advance(1)
    retracted = mem.save_perception("retracted summary", "procedural", session_id=sid)["memory_id"]
    mem.forget(retracted, "written twice")
    mem.forget(wrong, "it is on the right")
    empty = mem.start_session()["session_id"]
    overviews = mem.session_overviews([sid, empty, "ses_000000000000"])
    ours = overviews[sid]
    assert (ours["facts"], ours["perceptions"]) == (1, 3)  # forgotten memories are not counted
    assert ours["summary"]["id"] == last["memory_id"] and ours["summary"]["context"]["task"] == {"name": "dock"}
    assert overviews[empty] == overviews["ses_000000000000"] == {"facts": 0, "perceptions": 0, "summary": None}


@pytest.mark.parametrize("ids", ["ses_abc", ["not a session id"], 3])
def test_session_overviews_want_a_list_of_session_ids(mem: Memory, ids):
    with pytest.raises(ValidationError) as caught:
        mem.session_overviews(ids)
    assert caught.value.field == "session_ids"


class TextVectors:
    """A program's own embedder (a vector per text); ``during`` runs when ``text`` is embedded: after
    the call that embeds it read the store and before it writes, where another process may write."""

    model_id, dim = "lab-hash/8", 8

    def __init__(self, text: str | None = None, during: Callable[[], None] | None = None) -> None:
        self.text, self.during = text, during

    def embed(self, texts: Sequence[str]) -> Any:
        if self.during is not None and list(texts) == [self.text]:
            self.during()
        return np.array([[b + 1.0 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts],
                        dtype=np.float32)


def run_until_it_waits(holder: Memory, other: Memory, backend: str, call: Callable[[], Any]) -> threading.Thread:
    """Run ``call`` (a write through ``other``) on a thread, and return once it has ended or waits
    for a lock that ``holder``'s write on this thread holds: that write may then go on, and commit."""
    queued = threading.Event()
    real_write = other._db.write
    holder_pid = None if backend == "sqlite" else holder._db.connection().raw.info.backend_pid  # type: ignore[attr-defined]

    def write(*args: Any, **kwargs: Any) -> Any:
        queued.set()
        return real_write(*args, **kwargs)

    def waits() -> bool:
        if backend == "sqlite":
            return queued.is_set()  # its BEGIN IMMEDIATE waits for the caller's write
        with other._db.read() as conn:  # a transaction per look: PostgreSQL snapshots the view
            return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))",
                                     (holder_pid,)).fetchone()[0])

    other._db.write = write  # type: ignore[method-assign]
    thread = threading.Thread(target=call)
    thread.start()
    while thread.is_alive() and not waits():
        time.sleep(0.01)
    return thread


@pytest.mark.parametrize("second_collection", ["coll0", "coll1"])
def test_one_session_id_started_by_two_writers_at_once_is_started_once(db_path: Any, backend: str,
                                                                       second_collection: str):
    """The second writer's call runs while the first one's start_session is inside its write. On
    PostgreSQL it commits first (both once read no session and were both told "started"); SQLite's
    write lock queues it after the first. Either way one is started, the other answered as a serial
    call is: "exists", or ConflictError when it names another collection."""
    first, second = Memory(db_path, embedder=None), Memory(db_path, embedder=None)
    answers: dict[str, Any] = {}
    threads: list[threading.Thread] = []
    real_insert = first._db.insert_session

    def call(memory: Memory, collection: str) -> None:
        name = "first" if memory is first else "second"
        try:
            answers[name] = memory.start_session(collection=collection, session_id="ses_same")
        except ConflictError as exc:
            answers[name] = exc

    def racing_insert(*args: Any) -> Any:
        threads.append(run_until_it_waits(first, second, backend, lambda: call(second, second_collection)))
        return real_insert(*args)

    first._db.insert_session = racing_insert  # type: ignore[method-assign]
    try:
        call(first, "coll0")
        threads[0].join()
        results = list(answers.values())
        started = [r for r in results if isinstance(r, dict) and r["status"] == "started"]
        assert len(started) == 1 and len(results) == 2
        other = next(r for r in results if r is not started[0])
        if second_collection == "coll0":
            assert other["status"] == "exists" and other["started_at"] == started[0]["started_at"]
        else:
            assert isinstance(other, ConflictError) and other.field == "session_id"
        assert first.get_session("ses_same")["collection"] == started[0]["collection"]
    finally:
        first.close()
        second.close()


def _superseded_meanwhile(db_path: Any) -> tuple[int, Callable[[Memory], None], str]:
    """A memory that consolidation supersedes when its session ends, and that ending."""
    with Memory(db_path, embedder=None) as setup:
        r1, r2 = setup.start_session()["session_id"], setup.start_session()["session_id"]
        kept = setup.learn("the dock door sticks when wet", session_id=r1)["memory_id"]
        near = setup.learn("The dock door sticks when wet!", session_id=r2)["memory_id"]
        setup.end_session(r1)
    return near, lambda other: other.end_session(r2), f"memory {near} is superseded; update memory {kept} instead"


def _forgotten_meanwhile(db_path: Any) -> tuple[int, Callable[[Memory], None], str]:
    with Memory(db_path, embedder=None) as setup:
        mid = setup.learn("the door opens outward")["memory_id"]
    return mid, lambda other: other.forget(mid, "wrong"), f"memory {mid} is forgotten"


@pytest.mark.parametrize("meanwhile", [_forgotten_meanwhile, _superseded_meanwhile])
def test_update_of_a_memory_retired_while_its_text_was_embedded_is_a_conflict(db_path: Any, meanwhile: Any):
    """As when the forget or the merge came first: the update used to overwrite the forgotten (or
    superseded) memory's text and report "updated"."""
    mid, retire, message = meanwhile(db_path)
    with Memory(db_path, embedder=None) as other:
        embedder = TextVectors("corrected: the door opens inward", lambda: retire(other))
        with Memory(db_path, embedder=embedder) as mem:
            before = mem.get(mid)["content"]
            with pytest.raises(ConflictError) as info:
                mem.update(mid, "corrected: the door opens inward")
            assert info.value.field == "memory_id" and info.value.message == message
            assert mem.get(mid)["content"] == before


def test_update_without_a_context_keeps_the_context_another_update_gave_meanwhile(db_path: Any):
    """A context-less update keeps the memory's context: the one it holds when the update writes."""
    with Memory(db_path, embedder=None) as other:
        mid = other.learn("the lift is slow", {"place": "lift"})["memory_id"]
        embedder = TextVectors("the lift is very slow",
                                lambda: other.update(mid, "the lift is slow", {"place": "lift B"}))
        with Memory(db_path, embedder=embedder) as mem:
            assert mem.update(mid, "the lift is very slow")["status"] == "updated"
            record = mem.get(mid)
            assert (record["content"], record["context"]) == ("the lift is very slow", {"place": "lift B"})


def test_an_update_changing_the_context_during_an_updates_write_waits_for_it(db_path: Any, backend: str):
    """Inside a context-less update's write, after it read the context it keeps, another update
    gives the memory a new context. That one must wait for the first's commit (PostgreSQL: the row
    the first locked), or the first writes the old context over the new one: an end no serial order
    of the two gives."""
    with Memory(db_path, embedder=None) as other, Memory(db_path, embedder=None) as mem:
        mid = other.learn("the lift is slow", {"place": "lift"})["memory_id"]
        locked: list[int] = []
        threads: list[threading.Thread] = []
        real_lock, real_fetch = mem._db.lock_memory, mem._db.fetch_row

        def lock_memory(conn: Any, memory_id: int) -> None:
            real_lock(conn, memory_id)
            locked.append(memory_id)  # the next read is the one under the lock

        def fetch_row(conn: Any, memory_id: int) -> Any:
            row = real_fetch(conn, memory_id)
            if locked and not threads:
                threads.append(run_until_it_waits(
                    mem, other, backend, lambda: other.update(mid, "the lift is slow", {"place": "lift B"})))
            return row

        mem._db.lock_memory = lock_memory  # type: ignore[method-assign]
        mem._db.fetch_row = fetch_row  # type: ignore[method-assign]
        assert mem.update(mid, "the lift is very slow")["status"] == "updated"
        threads[0].join()
        record = mem.get(mid)
        assert (record["content"], record["context"]) in [("the lift is slow", {"place": "lift B"}),
                                                          ("the lift is very slow", {"place": "lift B"})]
