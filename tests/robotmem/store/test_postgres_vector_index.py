"""PostgreSQL's HNSW indexes: one per (collection, model), a partial index the planner uses for
recall in that collection; bulk loads leave it to be built once (reindex, migrate, the next
single write) instead of row by row; a version-1 store (one index per model) is migrated."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robotmem import Memory
from robotmem.store.postgres import PgStore
from robotmem.store.postgres.connection import PgConnection
from robotmem.cli.commands import render_stats
from robotmem.store.postgres.locks import lock_index_build
from robotmem.store.postgres.memories import BULK_ROWS, index_name
from robotmem.store.postgres.migrations import MIGRATIONS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from given_vectors import GivenVectors, vector_of

MODEL = GivenVectors.model_id


def _indexes(url: str) -> dict[str, str]:
    """name -> definition of the HNSW indexes on embeddings."""
    with PgStore(url) as store, store.read() as conn:
        rows = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'embeddings' "
                            "AND indexdef LIKE '%hnsw%' AND schemaname = current_schema()").fetchall()
    return {str(n): str(d) for n, d in rows}


def _ready(url: str) -> dict[tuple[str, str], bool]:
    with PgStore(url) as store, store.read() as conn:
        return {(c, m): bool(r) for c, m, r in conn.execute("SELECT collection, model_id, ready FROM vector_indexes")}


def _perceptions(collection: str, n: int) -> list[dict[str, Any]]:
    return [{"description": f"c{i % 20} {collection} reading {i}", "collection": collection} for i in range(n)]


def test_a_bulk_load_leaves_the_index_to_reindex_and_recall_stays_exact_meanwhile(postgres_url: str):
    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as mem:
        mem.save_perceptions(_perceptions("arm", BULK_ROWS))
        assert _ready(postgres_url) == {("arm", MODEL): False} and _indexes(postgres_url) == {}
        query = vector_of("c3 probe")
        before = [h["id"] for h in mem.recall("zzqxv", n=10, min_relevance=0, query_vector=query)["results"]]
        built = mem.rebuild_vector_indexes()
        assert [(b["collection"], b["model_id"], b["rows"]) for b in built] == [("arm", MODEL, BULK_ROWS)]
        assert _ready(postgres_url) == {("arm", MODEL): True}
        assert list(_indexes(postgres_url)) == [index_name("arm", MODEL)]
        after = [h["id"] for h in mem.recall("zzqxv", n=10, min_relevance=0, query_vector=query)["results"]]
        assert len(set(before) & set(after)) >= 9  # approximate now, exact before
        assert mem.rebuild_vector_indexes() == []  # nothing left to build
        # A small batch into the indexed pair is written into the index, row by row.
        mem.save_perceptions(_perceptions("arm", 3))
        assert _ready(postgres_url) == {("arm", MODEL): True}


def test_stats_says_whether_each_hnsw_index_is_built_or_being_built(postgres_url: str):
    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as mem:
        mem.save_perceptions(_perceptions("arm", BULK_ROWS))
        unbuilt = {"collection": "arm", "model_id": MODEL, "kind": "hnsw", "vectors": BULK_ROWS, "built": False,
                   "stale": True, "building": False}
        assert mem.stats()["vector_indexes"] == [unbuilt]
        assert "HNSW left unbuilt by a bulk load" in "\n".join(render_stats(mem.stats()))
        with PgStore(postgres_url) as other, other.write() as conn:  # a writer building it holds the pair's lock
            lock_index_build(conn, "arm", MODEL)
            assert mem.stats()["vector_indexes"] == [{**unbuilt, "building": True}]
        with PgStore(postgres_url) as other, other.write() as conn:  # as a robotmem before 2026-12-06 built it
            conn.execute("SELECT pg_advisory_xact_lock(?::int4, hashtext(?))", (0x726D7678, f"arm\n{MODEL}"))
            assert mem.stats()["vector_indexes"] == [{**unbuilt, "building": True}]
        mem.rebuild_vector_indexes()
        assert mem.stats()["vector_indexes"] == [{**unbuilt, "built": True, "stale": False}]
        assert mem.stats(collection="elsewhere")["vector_indexes"] == []


@pytest.mark.parametrize("write", ["learn", "save_perception"])
def test_the_next_single_write_builds_a_deferred_index(postgres_url: str, write: str):
    with Memory(postgres_url, embedder=GivenVectors(), collection="dock") as mem:
        mem.save_perceptions(_perceptions("dock", BULK_ROWS + 20))
        mem.save_perceptions(_perceptions("dock", 1))  # a later batch, however small, leaves it
        assert _indexes(postgres_url) == {} and _ready(postgres_url) == {("dock", MODEL): False}
        if write == "learn":
            mem.learn("c4 the dock light is dim")
        else:  # was left unbuilt: save_perception wrote its vector as a batch of one
            mem.save_perception("c4 the dock light is dim")
    assert _ready(postgres_url) == {("dock", MODEL): True}
    assert list(_indexes(postgres_url)) == [index_name("dock", MODEL)]


def test_recall_in_one_collection_walks_that_collections_index(postgres_url: str, monkeypatch: pytest.MonkeyPatch):
    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as mem:
        for collection in ("arm", "cart"):
            mem.save_perceptions(_perceptions(collection, 10 * BULK_ROWS))
        mem.rebuild_vector_indexes()
        assert len(_indexes(postgres_url)) == 2
        ran: list[tuple[str, Any]] = []
        real = PgConnection.execute

        def record(self: PgConnection, query: str, params: Any = ()) -> Any:
            ran.append((query, params))
            return real(self, query, params)

        monkeypatch.setattr(PgConnection, "execute", record)
        hits = mem.recall("zzqxv", collection="cart", n=5, min_relevance=0, query_vector=vector_of("c7 probe"))
        monkeypatch.undo()
    assert hits["count"] == 5 and all("cart" in h["content"] for h in hits["results"])
    vector_queries = [(q, p) for q, p in ran if "ORDER BY e.vector::vector" in q]
    assert len(vector_queries) == 1
    query, params = vector_queries[0]
    with PgStore(postgres_url) as store, store.read() as conn:
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query, params))
    assert index_name("cart", MODEL) in plan and index_name("arm", MODEL) not in plan, plan


def test_a_version_1_store_gets_per_collection_indexes(postgres_url: str):
    """A store written by version 1 (one index per model) keeps its vectors; the per-model index
    goes, and the per-collection ones are built by reindex."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as raw, raw.transaction():
        raw.execute(MIGRATIONS[0][1])
        raw.execute("CREATE TABLE robotmem_schema (version integer NOT NULL)")
        raw.execute("INSERT INTO robotmem_schema VALUES (1)")
        raw.execute("INSERT INTO memories (id, collection, type, content, search_text, search_tsv, context, "
                    "content_hash, confidence, reinforced_at, first_seen, last_seen, created_at, occurred_at, "
                    "updated_at) SELECT i, c, 'fact', 'c1 old ' || i, 'old', 'old', '{}', 'h' || i, 0.9, 0, 0, 0, "
                    "0, 0, 0 FROM generate_series(1, 40) AS i, (VALUES ('a'), ('b')) AS t(c) WHERE "
                    "(i % 2 = 0) = (c = 'a')")
        vectors = [(i, "a" if i % 2 == 0 else "b", MODEL, 32, vector_of(f"c1 old {i}")) for i in range(1, 41)]
        from pgvector.psycopg import register_vector

        register_vector(raw)
        with raw.cursor() as cur:
            cur.executemany("INSERT INTO embeddings VALUES (%s, %s, %s, %s, %s)", vectors)
        raw.execute("CREATE INDEX embeddings_hnsw_old ON embeddings USING hnsw ((vector::vector(32)) "
                    "vector_cosine_ops) WHERE model_id = 'test-given/32'")
        raw.execute("INSERT INTO vector_models VALUES ('test-given/32', 32, 'embeddings_hnsw_old')")
    with Memory(postgres_url, embedder=GivenVectors(), collection="a") as mem:
        assert _indexes(postgres_url) == {}
        assert _ready(postgres_url) == {("a", MODEL): False, ("b", MODEL): False}
        assert sorted((b["collection"], b["rows"]) for b in mem.rebuild_vector_indexes()) == [("a", 20), ("b", 20)]
        got = mem.recall("zzqxv", n=3, min_relevance=0, min_confidence=0, query_vector=vector_of("c1 old 4"))
    assert got["results"][0]["id"] == 4
    assert sorted(_indexes(postgres_url)) == sorted([index_name("a", MODEL), index_name("b", MODEL)])


def test_migrate_loads_vectors_then_builds_each_index_once(tmp_path: Path, postgres_url: str):
    from robotmem.store.backend import open_store
    from robotmem.store.copy import copy_store

    source = tmp_path / "source.db"
    with Memory(source, embedder=GivenVectors(), collection="arm") as mem:
        mem.save_perceptions(_perceptions("arm", 700))
        mem.save_perceptions(_perceptions("cart", 30))
    with open_store(source) as src, open_store(postgres_url) as dst:
        dst.migrate()
        result = copy_store(src, dst, batch=BULK_ROWS)
    assert result["memories"] == 730
    assert sorted((b["collection"], b["rows"]) for b in result["vector_indexes"]) == [("arm", 700), ("cart", 30)]
    assert _ready(postgres_url) == {("arm", MODEL): True, ("cart", MODEL): True}
    query = np.asarray(vector_of("c5 probe"))
    with Memory(source, embedder=GivenVectors()) as lite, Memory(postgres_url, embedder=GivenVectors()) as pg:
        args = {"query": "zzqxv", "collection": "arm", "n": 10, "min_relevance": 0, "query_vector": query}
        assert ({h["id"] for h in pg.recall(**args)["results"]} == {h["id"] for h in lite.recall(**args)["results"]})


def test_reindex_reports_the_indexes_it_built(postgres_url: str):
    with Memory(postgres_url, embedder=GivenVectors(), collection="bay") as mem:
        mem.save_perceptions(_perceptions("bay", BULK_ROWS))
        result = mem.reindex()
    assert result["reembedded"] == 0
    assert [(b["collection"], b["rows"]) for b in result["vector_indexes"]] == [("bay", BULK_ROWS)]
    assert _ready(postgres_url) == {("bay", MODEL): True}


def test_import_loads_vectors_then_builds_each_index_once(tmp_path: Path, postgres_url: str,
                                                           monkeypatch: pytest.MonkeyPatch):
    from robotmem.store.postgres import memories

    built_over: list[tuple[str, int]] = []
    real = memories.build_vector_index

    def spy(conn: PgConnection, collection: str, model_id: str, dim: int, *, rebuild: bool = False) -> bool:
        built_over.append((collection, memories.vector_count(conn, collection, model_id)))
        return real(conn, collection, model_id, dim, rebuild=rebuild)

    monkeypatch.setattr(memories, "build_vector_index", spy)
    source = tmp_path / "source.db"
    with Memory(source, embedder=GivenVectors(), collection="arm") as mem:
        mem.save_perceptions(_perceptions("arm", 40))
        mem.save_perceptions(_perceptions("cart", 20))
        mem.export(tmp_path / "fleet.jsonl")
    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as pg:
        counts = pg.import_(tmp_path / "fleet.jsonl")
        assert counts["memories"] == 60 and counts["embedded"] == 0  # vectors came with the file
        assert _ready(postgres_url) == {("arm", MODEL): True, ("cart", MODEL): True}
        assert sorted(built_over) == [("arm", 40), ("cart", 20)]  # once each, over every loaded vector
        query = np.asarray(vector_of("c5 probe"))
        got = [h["content"] for h in pg.recall("zzqxv", n=5, min_relevance=0, query_vector=query)["results"]]
    with Memory(source, embedder=GivenVectors(), collection="arm") as lite:
        assert got == [h["content"] for h in lite.recall("zzqxv", n=5, min_relevance=0, query_vector=query)["results"]]


def _searchable(url: str) -> dict[str, bool]:
    with PgStore(url) as store, store.read() as conn:
        return {str(s): bool(f) for s, f in conn.execute(
            "SELECT m.status, bool_or(e.searchable) FROM embeddings e JOIN memories m ON m.id = e.memory_id "
            "GROUP BY m.status")}


def test_superseded_and_forgotten_vectors_stay_out_of_the_index_so_recall_walks_it(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch):
    """Consolidation supersedes many memories over months. Their vectors in the graph crowded the
    walk's candidates, so recall came back with fewer than it asked for and scanned every vector."""
    import psycopg

    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as mem:
        ids = mem.save_perceptions(_perceptions("arm", 2 * BULK_ROWS))
        mem.rebuild_vector_indexes()
        mem.forget(ids[0], reason="the camera was miscalibrated")
        with mem.store.write() as conn:  # as end_session marks a merged group's members
            conn.execute("UPDATE memories SET status = 'superseded' WHERE id = ANY(?) AND id % 10 <> 0", (ids[1:],))
        assert _searchable(postgres_url) == {"active": True, "forgotten": False, "superseded": False}
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("VACUUM embeddings")  # as autovacuum does: the rows' old versions leave the graph
        ran: list[str] = []
        real = PgConnection.execute

        def record(self: PgConnection, query: str, params: Any = ()) -> Any:
            ran.append(query)
            return real(self, query, params)

        monkeypatch.setattr(PgConnection, "execute", record)
        # Every memory near this query's vector (texts "c3 ...": ids 4, 24, 44, ...) is superseded.
        hits = mem.recall("zzqxv", n=10, min_relevance=0, query_vector=vector_of("c3 probe"))["results"]
        monkeypatch.undo()
    assert all(h["id"] % 10 == 0 and h["id"] != ids[0] for h in hits)
    walks = [q for q in ran if "ORDER BY e.vector::vector" in q]
    exact = [q for q in ran if "ORDER BY e.vector <=>" in q]
    assert len(walks) == 1 and exact == []  # enough live candidates from the graph alone


def test_a_vector_stored_for_a_memory_no_longer_live_is_not_searchable(tmp_path: Path, postgres_url: str):
    """Import brings superseded and forgotten memories with their vectors: they stay out of the index."""
    source = tmp_path / "source.db"
    with Memory(source, embedder=GivenVectors()) as lite:
        kept = lite.learn("c1 the dock door sticks in the cold")["memory_id"]
        gone = lite.learn("c2 the dock light flickers")["memory_id"]
        lite.forget(gone, reason="the light was replaced")
        lite.export(tmp_path / "e.jsonl")
    with Memory(postgres_url, embedder=GivenVectors()) as pg:
        assert pg.import_(tmp_path / "e.jsonl")["memories"] == 2
        assert kept != gone and _searchable(postgres_url) == {"active": True, "forgotten": False}


def test_an_index_built_before_live_only_indexes_is_reported_and_rebuilt_by_reindex(postgres_url: str,
                                                                                     tmp_path: Path):
    """Migration 8 keeps older indexes (rebuilding them would hold every process at the first open
    for minutes on a large store): stats names them, `robotmem reindex` rebuilds them."""
    with Memory(postgres_url, embedder=GivenVectors(), collection="arm") as mem:
        mem.save_perceptions(_perceptions("arm", BULK_ROWS))
        mem.rebuild_vector_indexes()
        name = index_name("arm", MODEL)
        with mem.store.write() as conn:  # the index and its row as a robotmem before migration 8 left them
            conn.execute(f"DROP INDEX {name}")
            conn.execute(f"CREATE INDEX {name} ON embeddings USING hnsw ((vector::vector(32)) vector_cosine_ops) "
                         f"WHERE collection = 'arm' AND model_id = '{MODEL}'")
            conn.execute("UPDATE vector_indexes SET live_only = false")
        (state,) = mem.stats()["vector_indexes"]
        assert state["built"] and state["stale"]
        assert "`robotmem reindex` rebuilds it without them" in "\n".join(render_stats(mem.stats()))
        mem.save_perceptions(_perceptions("arm", 3))  # a write does not stop the fleet to rebuild it,
        with Memory(tmp_path / "other.db", embedder=GivenVectors(), collection="arm") as other:
            other.save_perceptions(_perceptions("arm", 2))
            other.export(tmp_path / "e.jsonl")
        assert mem.import_(tmp_path / "e.jsonl")["memories"] == 2  # nor does an import (or a migrate)
        assert "searchable" not in _indexes(postgres_url)[name]
        assert [(b["collection"], b["rows"]) for b in mem.reindex()["vector_indexes"]] == [("arm", BULK_ROWS + 5)]
        assert "searchable" in _indexes(postgres_url)[name]
        assert not mem.stats()["vector_indexes"][0]["stale"]


def test_vectors_of_memories_no_longer_live_before_migration_8_leave_the_index_when_it_is_rebuilt(
        postgres_url: str):
    """The migration itself does not rewrite them (a large store's first open would wait minutes):
    `robotmem reindex` marks them as it rebuilds the pair's index, and the triggers keep it after."""
    with Memory(postgres_url, embedder=GivenVectors()) as mem:
        kept = mem.learn("c1 the dock door sticks in the cold")["memory_id"]
        gone = mem.learn("c2 the dock light flickers")["memory_id"]
        mem.forget(gone, reason="replaced")
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as raw, raw.transaction():  # back to version 7
        raw.execute("DROP TRIGGER memories_status_to_embedding ON memories")
        raw.execute("DROP TRIGGER embeddings_searchable ON embeddings")
        raw.execute("DROP FUNCTION robotmem_status_to_embedding(), robotmem_embedding_searchable()")
        raw.execute("ALTER TABLE embeddings DROP COLUMN searchable")
        raw.execute("ALTER TABLE vector_indexes DROP COLUMN live_only")
        raw.execute("DELETE FROM robotmem_schema WHERE version >= 8")
    with Memory(postgres_url, embedder=GivenVectors()) as mem:
        assert _searchable(postgres_url) == {"active": True, "forgotten": True}  # as it was: not rewritten
        assert mem.stats()["vector_indexes"][0]["stale"]
        mem.reindex()
        assert _searchable(postgres_url) == {"active": True, "forgotten": False}
        mem.forget(kept, reason="the door was fixed")  # the trigger runs from now on
        assert _searchable(postgres_url) == {"forgotten": False}
