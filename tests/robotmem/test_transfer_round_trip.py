"""A store moved between places as a lab does over months (export then import, ``migrate --to``
SQLite <-> PostgreSQL, in every direction and twice around) arrives field for field.

The oracle reads both stores with plain SQL (apsw / psycopg), not through robotmem: every column of
every memory, session, payload, vector and spatial point, with memory ids replaced by uids (import
assigns new ids: docs/fleet.md, robotmem/transfer.py). Recall by an exact filter returns the same
uids on both sides.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from test_service_sessions import TextVectors

from robotmem import Memory
from robotmem.cli.main import main
from robotmem.errors import ConflictError, ValidationError

EXAMPLES = int(os.environ.get("ROBOTMEM_ROUND_TRIP_EXAMPLES", "6"))

# -- generated stores -------------------------------------------------------------------------------

no_nul = st.characters(codec="utf-8", exclude_characters="\x00")
# Combining marks, right-to-left text, emoji, zero-width joiners: characters the JSON, the FTS
# tokenizers and PostgreSQL's text handle each in their own way.
hard_chars = st.one_of(no_nul, st.sampled_from(["\u0301", "\u05d0", "\u0627", "\u200f", "\u200d", "\U0001f916",
                                                "\ufeff", "\u2028", "\\", '"', "\t"]))
hard_text = st.text(hard_chars, min_size=1, max_size=12)
words = st.text(hard_chars, min_size=5, max_size=30).filter(lambda s: len(s.strip()) >= 5)
hard_floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(
    [-0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-300, 1e15, 0.1]))
hard_ints = st.one_of(st.integers(-(2**53), 2**53), st.sampled_from([2**63 - 1, -(2**63), 2**62 + 1]))
scalars = st.one_of(st.none(), st.booleans(), hard_ints, hard_floats, hard_text)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(hard_text, inner, max_size=3)),
                           max_leaves=12)

def _nested(depth: int, leaf: Any) -> Any:
    for level in range(depth):
        leaf = {f"k{level}": leaf} if level % 2 else [leaf]
    return leaf


# Up to CONTEXT_MAX_DEPTH (32) keys in, and past it (refused at write: the store goes on without it).
deep = st.builds(_nested, st.sampled_from([8, 20, 29, 29, 30]), scalars)
contexts = st.dictionaries(st.sampled_from(["params", "task", "robot", "misc", "env"]),
                           st.dictionaries(hard_text, st.one_of(json_values, deep), max_size=3), max_size=3)
coordinates = st.one_of(st.floats(-1e15, 1e15, allow_nan=False),
                        st.sampled_from([1e-100, -1e-200, 1e-300, 1e15, -1e15, -0.0, 0.0]))
positions = st.lists(coordinates, min_size=2, max_size=3)
DTYPES = ["float32", "float64", ">f8", "float16", "int8", "uint16", "int64", "bool", "complex64"]


def _array(dtype: str, values: list[float], two_d: bool) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    if dtype not in ("float32", "float64", ">f8", "float16", "complex64"):
        array = np.nan_to_num(array, nan=0.0, posinf=0.0, neginf=0.0).clip(-100, 100)
    with np.errstate(over="ignore", invalid="ignore"):  # 1e6 as float16 is inf: meant
        array = array.astype(dtype)
    return array.reshape(2, -1).T if two_d and array.size % 2 == 0 else array  # .T: not C-contiguous


arrays = st.builds(_array, st.sampled_from(DTYPES),
                   st.lists(st.floats(-1e6, 1e6) | st.sampled_from([math.nan, math.inf, -0.0]), min_size=1,
                            max_size=6), st.booleans())
payloads = st.one_of(st.none(), arrays, st.binary(max_size=20), json_values,
                     st.dictionaries(st.sampled_from(["img", "joints", "raw", "meta"]),
                                     st.one_of(arrays, st.binary(max_size=8), json_values), max_size=3))
times = st.one_of(st.none(), st.floats(0.0, 253_402_300_799.0), st.sampled_from(
    [0.0, 1e-7, -1.0, "1969-12-31T23:59:59Z", 4102444800.123456789, 253_402_300_799.0,
     "2101-01-01T00:00:00.123456789Z"]))

fact = st.tuples(st.just("fact"), words, st.one_of(st.just({}), contexts), times)
perception = st.tuples(st.just("perception"), words, contexts, times, payloads, positions,
                       st.sampled_from(["visual", "tactile", "proprioceptive", "auditory", "procedural"]))
later = st.tuples(st.sampled_from(["update", "forget", "repeat"]), st.integers(0, 100), words)
stores = st.fixed_dictionaries({
    "sessions": st.lists(st.tuples(st.sampled_from(["default", "lab-b", "lab.c:2"]), contexts,
                                   st.one_of(st.none(), st.sampled_from(["open", -0.0, 5e-324]), st.floats(0, 1))),
                         min_size=1, max_size=3),
    "writes": st.lists(st.tuples(st.one_of(fact, perception), st.integers(-1, 3)), min_size=1, max_size=10),
    "later": st.lists(later, max_size=4),
})


def _refused(call: Any) -> Any:
    """A write the checks refuse is a clear ValidationError; the generated store goes on without it."""
    try:
        return call()
    except (ValidationError, ConflictError) as exc:  # a forgotten memory updated, say
        assert exc.field, exc
        event(f"refused: {exc.field}")
        return None


_PHRASE = "the gripper holds the red cup at the shelf edge firmly"


def _fill(mem: Memory, spec: dict[str, Any], clock: Any) -> None:
    sessions = []
    for collection, ctx, _ in spec["sessions"]:
        started = _refused(lambda: mem.start_session(collection=collection, context=ctx))
        if started is not None:
            sessions.append(started["session_id"])
    ids: list[int] = []
    for write, which in spec["writes"]:
        clock.advance(0.000_000_3)  # sub-microsecond parts in every stamp
        sid = sessions[which] if 0 <= which < len(sessions) else None
        if write[0] == "fact":
            _, text, ctx, when = write
            # With a near repeat (word overlap 11/12, over merge_text_similarity) in the session and
            # in the next one: consolidation at end_session merges them (superseded, absorbed).
            text = f"{text} {_PHRASE}"
            done = _refused(lambda: mem.learn(text, ctx, session_id=sid, occurred_at=when))
            for again in (sid, sessions[(which + 1) % len(sessions)] if sessions else None):
                _refused(lambda: mem.learn(text + " again", ctx, session_id=again, occurred_at=when))
        else:
            _, text, ctx, when, data, where, kind = write
            ctx = {**ctx, "spatial": {"p": where}}
            done = _refused(lambda: mem.save_perception(text, kind, data=data, metadata=ctx, session_id=sid,
                                                        occurred_at=when))
        if done is not None:
            ids.append(done["memory_id"])
    for (how, which, text) in spec["later"]:
        if not ids:
            break
        target = ids[which % len(ids)]
        clock.advance(1.5)
        if how == "update":
            new = _refused(lambda: mem.update(target, text))
            if new is not None and new.get("memory_id"):
                ids.append(new["memory_id"])
        elif how == "forget":
            _refused(lambda: mem.forget(target, text))
        else:
            record = mem.get(target)
            if record["type"] == "fact" and record["status"] == "active":
                _refused(lambda: mem.learn(record["content"], record["context"], collection=record["collection"]))
    for sid, (_, _, end) in zip(sessions, spec["sessions"]):
        if end != "open":
            clock.advance(2.0)
            mem.end_session(sid, end)


# -- the oracle: both stores read with plain SQL ------------------------------------------------------

def _f32(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _sqlite_rows(path: Path) -> dict[str, Any]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    cur = conn.cursor()
    cols = [r[1] for r in cur.execute("PRAGMA table_info(memories)")]
    memories = [dict(zip(cols, row)) for row in
                cur.execute(f"SELECT {', '.join(c if c != 'context' else 'json(context)' for c in cols)} "
                            "FROM memories")]
    sessions = [dict(zip(("id", "collection", "context", "started_at", "ended_at", "outcome_score", "summary"), r))
                for r in cur.execute("SELECT id, collection, json(context), started_at, ended_at, outcome_score, "
                                     "summary FROM sessions")]
    payloads = {r[0]: (bytes(r[1]), r[2]) for r in cur.execute("SELECT memory_id, data, summary FROM payloads")}
    vectors = {r[0]: (r[1], r[2], r[3], _f32(bytes(r[4]))) for r in
               cur.execute("SELECT memory_id, collection, model_id, dim, vector FROM embeddings")}
    points = [(r[0], r[1], r[2], r[3], r[4]) for r in
              cur.execute("SELECT memory_id, field, px, py, pz FROM points")]
    conn.close()
    return {"memories": memories, "sessions": sessions, "payloads": payloads, "vectors": vectors, "points": points}


def _postgres_rows(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        cur = conn.execute("SELECT * FROM memories LIMIT 0")
        cols = [d.name for d in cur.description if d.name != "search_tsv"]
        select = ", ".join(f"{c}::text" if c in ("context", "absorbed") else c for c in cols)
        memories = [dict(zip(cols, r)) for r in conn.execute(f"SELECT {select} FROM memories")]
        sessions = [dict(zip(("id", "collection", "context", "started_at", "ended_at", "outcome_score", "summary"),
                             r)) for r in conn.execute("SELECT id, collection, context::text, started_at, ended_at, "
                                                       "outcome_score, summary FROM sessions")]
        payloads = {r[0]: (bytes(r[1]), r[2]) for r in conn.execute("SELECT memory_id, data, summary FROM payloads")}
        vectors = {r[0]: (r[1], r[2], r[3], [float(np.float32(x)) for x in json.loads(r[4])]) for r in
                   conn.execute("SELECT memory_id, collection, model_id, dim, vector::text FROM embeddings")}
        points = [(r[0], r[1], r[2], r[3], r[4]) for r in
                  conn.execute("SELECT memory_id, field, xy[0], xy[1], z FROM spatial_points")]
    return {"memories": memories, "sessions": sessions, "payloads": payloads, "vectors": vectors, "points": points}


def _json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else text


def _normalised(raw: dict[str, Any]) -> dict[str, Any]:
    """Keyed by uid, ids replaced by uids: what docs/fleet.md says every move keeps."""
    uid_of = {m["id"]: m["uid"] for m in raw["memories"]}
    memories = {}
    for m in raw["memories"]:
        row = {k: v for k, v in m.items() if k != "id"}
        row["context"] = _json(row["context"])
        row["absorbed"] = sorted(uid_of.get(i, f"gone:{i}") for i in _json(row["absorbed"]))
        row["superseded_by"] = None if m["superseded_by"] is None else uid_of.get(m["superseded_by"], "gone")
        row["protected"], row["embed"] = bool(row["protected"]), bool(row["embed"])
        row["payload"] = raw["payloads"].get(m["id"])
        row["vector"] = raw["vectors"].get(m["id"])
        row["points"] = sorted(p[1:] for p in raw["points"] if p[0] == m["id"])
        memories[m["uid"]] = row
    sessions = {s["id"]: {**s, "context": _json(s["context"]), "summary": _json(s["summary"])}
                for s in raw["sessions"]}
    return {"memories": memories, "sessions": sessions}


def _rows(where: Any) -> dict[str, Any]:
    return _normalised(_postgres_rows(where) if isinstance(where, str) else _sqlite_rows(where))


def _ids(where: Any) -> dict[int, str]:
    raw = _postgres_rows(where) if isinstance(where, str) else _sqlite_rows(where)
    return {m["id"]: m["uid"] for m in raw["memories"]}


def _comparable(rows: dict[str, Any], kinds: list[str], move: str) -> dict[str, Any]:
    """Rows as every place of the route may hold them: contexts through jsonb when PostgreSQL is on
    it; the full-text tokens as a multiset when import recomputed them (docs/reliability.md) from
    a context whose keys came in another order (jsonb's, or the export's canonical JSON)."""
    for part in rows.values():
        for row in part.values():
            if "postgresql" in kinds:
                row["context"] = _as_jsonb_reads(row["context"])
            if "search_text" in row and ("postgresql" in kinds or move == "export-import"):
                row["search_text"] = sorted(row["search_text"].split(" "))
    return rows


def _as_jsonb_reads(value: Any) -> Any:
    """A context's numbers as PostgreSQL's jsonb reads them back (docs/data-model.md, "Numbers read
    back as stored"): -0.0 as 0.0, a float from 1e16 up to 2**63 as the integer its shortest decimal
    spells; an integer beyond 64 bits (the raw text of such a float of 1e19 or more) is that float."""
    if isinstance(value, dict):
        return {k: _as_jsonb_reads(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_jsonb_reads(v) for v in value]
    if isinstance(value, float):
        if value == 0:
            return 0.0
        if 1e16 <= abs(value) <= 2**63:
            return int(Decimal(repr(value)))
        return value
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return float(value)
    return value


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    for part in ("sessions", "memories"):
        if a[part].keys() != b[part].keys():
            out.append(f"{part}: keys differ: only in source {sorted(a[part].keys() - b[part].keys())[:3]}, "
                       f"only in target {sorted(b[part].keys() - a[part].keys())[:3]}")
        for key in a[part].keys() & b[part].keys():
            for field in a[part][key]:
                x, y = a[part][key][field], b[part][key].get(field)
                if not _same(x, y):
                    out.append(f"{part} {key} {field}: {x!r} -> {y!r}")
    return out


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return x == y and math.copysign(1, x) == math.copysign(1, y) or (math.isnan(x) and math.isnan(y))
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(map(_same, x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return bool(x == y) and type(x) is type(y) or (isinstance(x, (int, float)) and not isinstance(x, bool)
                                                   and isinstance(y, (int, float)) and x == y
                                                   and type(x) is type(y))


def _recalled_uids(where: Any) -> list[str]:
    """Every memory recall finds by an exact filter (spatial present), as uids."""
    raw = _postgres_rows(where) if isinstance(where, str) else _sqlite_rows(where)
    uid_of = {m["id"]: m["uid"] for m in raw["memories"]}
    with Memory(where, embedder=None) as mem:
        found = set()
        for collection in ("default", "lab-b", "lab.c:2"):
            for flt in ({"spatial": {"$exists": True}}, {"spatial": {"$exists": False}}):
                hits = mem.recall("", collection=collection, context_filter=flt, n=100, min_confidence=0)["results"]
                found |= {uid_of[h["id"]] for h in hits}
    return sorted(found)


# -- the moves ----------------------------------------------------------------------------------------

@contextmanager
def _schema(server_url: str, name: str) -> Iterator[str]:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
        admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        admin.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in server_url else "?"
    try:
        yield f"{server_url}{sep}options=-csearch_path%3D{name},public"
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {name} CASCADE")


def _store_option(where: Any) -> list[str]:
    return ["--url", where] if isinstance(where, str) else ["--db", str(where)]


def _migrate(source: Any, target: Any) -> None:
    assert main([*_store_option(source), "--json", "migrate", "--to", str(target)]) == 0


def _export_import(source: Any, target: Any, file: Path) -> None:
    """``robotmem export`` then ``Memory.import_``: the import keeps a vector only of the store's own
    embedder (docs/reliability.md), which the command line cannot be given."""
    assert main([*_store_option(source), "--json", "export", str(file)]) == 0
    with Memory(target, embedder=TextVectors()) as mem:
        mem.import_(file)


_counter = iter(range(1_000_000))


@pytest.fixture
def places(tmp_path_factory: pytest.TempPathFactory, postgres_server_url: str):
    """A factory of empty places: ``sqlite`` (a file) or ``postgresql`` (a fresh schema)."""
    @contextmanager
    def place(kind: str) -> Iterator[Any]:
        n = next(_counter)
        if kind == "sqlite":
            yield tmp_path_factory.mktemp("place") / f"p{n}.db"
        else:
            with _schema(postgres_server_url, f"rt{os.getpid()}_{n}") as url:
                yield url
    return place


@contextmanager
def _places_along(places: Any, kinds: list[str]) -> Iterator[list[Any]]:
    with ExitStack() as stack:
        yield [stack.enter_context(places(kind)) for kind in kinds]


ROUTES = {
    "sqlite-sqlite": ["sqlite", "sqlite"], "sqlite-postgresql": ["sqlite", "postgresql"],
    "postgresql-sqlite": ["postgresql", "sqlite"], "postgresql-postgresql": ["postgresql", "postgresql"],
    "twice-around": ["sqlite", "postgresql", "sqlite", "postgresql", "sqlite"],
}


@pytest.mark.parametrize("move", ["migrate", "export-import"])
@pytest.mark.parametrize("route", list(ROUTES))
@settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
           suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=stores)
def test_a_store_moved_along_a_route_arrives_field_for_field(places, tmp_path_factory, clock, capsys, spec, route,
                                                             move):
    kinds = ROUTES[route]
    with _places_along(places, kinds) as where:
        with Memory(where[0], clock=clock, embedder=TextVectors()) as mem:
            _fill(mem, spec, clock)
        before = _rows(where[0])
        for row in before["memories"].values():
            event(f"{row['type']} {row['status']}" + (" absorbing" if row["absorbed"] else ""))
        before = _comparable(before, kinds, move)
        folder = tmp_path_factory.mktemp("files")
        for step, (a, b) in enumerate(zip(where, where[1:])):
            if move == "migrate":
                _migrate(a, b)
                assert _ids(b) == _ids(a)  # migrate keeps ids too (docs/fleet.md)
            else:
                _export_import(a, b, folder / f"step{step}.jsonl")
            assert _differences(before, _comparable(_rows(b), kinds, move)) == [], f"step {step}: {kinds[step]} -> {kinds[step + 1]}"
        if move == "export-import":
            # The same file imported again stores nothing new.
            last = where[-1]
            # The same file imported again, with ``robotmem import``, stores nothing new; nor does it
            # in the store it all came from.
            for place in (last, where[0]):
                capsys.readouterr()
                assert main([*_store_option(place), "--json", "import", str(folder / f"step{len(where) - 2}.jsonl")]) == 0
                again = json.loads(capsys.readouterr().out)
                assert again["memories"] == 0 and again["sessions"] == 0, again
            assert _differences(before, _comparable(_rows(last), kinds, move)) == []
        # Last: recall counts its hits (access_count), which would differ from the copies already made.
        assert _recalled_uids(where[-1]) == _recalled_uids(where[0])


# -- a damaged file -----------------------------------------------------------------------------------

def _counts(where: Any) -> tuple[int, int]:
    raw = _postgres_rows(where) if isinstance(where, str) else _sqlite_rows(where)
    return len(raw["sessions"]), len(raw["memories"])


@settings(max_examples=EXAMPLES, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=stores, which=st.integers(1, 10_000), cut=st.floats(0, 1, exclude_max=True),
       damage=st.sampled_from(["cut", "not utf-8", "cut short"]))
def test_a_damaged_line_refuses_the_file_naming_it_and_imports_nothing(tmp_path_factory, clock, db_path, spec,
                                                                         which, cut, damage):
    folder = tmp_path_factory.mktemp("damaged")
    with Memory(folder / "source.db", clock=clock, embedder=TextVectors()) as mem:
        _fill(mem, spec, clock)
        mem.export(folder / "e.jsonl")
    lines = (folder / "e.jsonl").read_bytes().splitlines(keepends=True)
    number = 2 + which % (len(lines) - 1)  # a line after the header (the end record included)
    line = lines[number - 1].rstrip(b"\n")
    at = int(cut * len(line))
    if damage == "not utf-8":
        lines[number - 1] = line[:at] + b"\xff" + line[at:] + b"\n"
    else:
        lines[number - 1] = line[:at] + b"\n"
        if damage == "cut short":
            del lines[number:]
    (folder / "bad.jsonl").write_bytes(b"".join(lines))
    with Memory(db_path, embedder=TextVectors()) as target:
        target.start_session(session_id="ses_kept")  # what the store held stays as it was
        # A line cut to nothing is a blank line, which a file may hold: the record is lost, and the
        # counts of the end record (or its absence) refuse the file instead.
        named = f"line {number}[:,]" if at or damage == "not utf-8" else "nothing imported: .*(lost|cut short)"
        with pytest.raises(ValidationError, match=named) as refused:
            target.import_(folder / "bad.jsonl")
        assert refused.value.field in ("path", None), refused.value
    assert _counts(db_path) == (1, 0)


# -- what a store cannot hold is refused at write -----------------------------------------------------

LONE = "\ud800"
SURROGATE_WRITES = {
    "insight": lambda m: m.learn(f"the cup {LONE} slips"),
    "context key": lambda m: m.learn("the cup slips", {"misc": {LONE: 1}}),
    "context value": lambda m: m.learn("the cup slips", {"misc": {"a": [LONE]}}),
    "description": lambda m: m.save_perception(f"camera {LONE} frame", data=[1, 2]),
    "data": lambda m: m.save_perception("camera frame", data={"label": LONE}),
    "data key": lambda m: m.save_perception("camera frame", data={LONE: 1}),
    "session context": lambda m: m.start_session(context={"task": {"name": LONE}}),
    "collection": lambda m: m.learn("the cup slips", collection=f"lab{LONE}"),
}


@pytest.mark.parametrize("place", list(SURROGATE_WRITES))
def test_a_lone_surrogate_anywhere_is_refused_naming_the_field_and_stores_nothing(mem: Memory, db_path, place):
    with pytest.raises(ValidationError) as refused:
        SURROGATE_WRITES[place](mem)
    assert refused.value.field and "surrogate" in refused.value.message or refused.value.field == "collection", \
        refused.value
    assert _counts(db_path) == (0, 0)


# -- what recall finds after a move -------------------------------------------------------------------

# More part numbers than the index keeps (IDENTIFIER_MAX_LEAVES, 32), under keys whose written order
# (longest first) is not jsonb's (shortest first).
MANY_PARTS = {"misc": {"k" * (40 - i): f"part{i}x" for i in range(40)}}


def _parts_found(where: Any) -> list[int]:
    with Memory(where, embedder=None) as mem:
        return [i for i in range(40) if mem.recall(f"part{i}x", n=5, min_confidence=0)["results"]]


def test_the_index_keeps_the_same_identifiers_whatever_the_order_of_the_keys():
    from robotmem.store.tokens import memory_search_text

    reversed_keys = {"misc": dict(reversed(MANY_PARTS["misc"].items()))}
    assert set(memory_search_text("tray", MANY_PARTS).split()) == \
        set(memory_search_text("tray", reversed_keys).split())


def test_a_memory_imported_from_either_store_is_found_by_the_same_part_numbers(mem: Memory, db_path, tmp_path):
    mem.save_perception("camera sees the tray", metadata=MANY_PARTS)
    mem.export(tmp_path / "e.jsonl")
    found = _parts_found(db_path)
    assert len(found) == 32
    with Memory(tmp_path / "copy.db", embedder=None) as copy:
        copy.import_(tmp_path / "e.jsonl")
    assert _parts_found(tmp_path / "copy.db") == found


def test_an_outcome_of_negative_zero_is_stored_as_zero_in_either_store(mem: Memory, db_path):
    sid = mem.start_session()["session_id"]
    mem.end_session(sid, -0.0)
    (session,) = _rows(db_path)["sessions"].values()
    assert session["outcome_score"] == 0.0 and math.copysign(1, session["outcome_score"]) == 1
