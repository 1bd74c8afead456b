"""PostgreSQL document frequencies at scale: the plan and time of relevance's per-word count.

Builds a store of ``--size`` memories in a fresh schema (SQL inserts, no embedding model),
86 % of them superseded and 2 % forgotten, as in a consolidated store, then times
``robotmem.search.relevance.document_frequencies`` for a word in every memory ("arm"), a word
in 1 % ("w7") and one in 0.1 % ("u5"), and prints EXPLAIN (ANALYZE, BUFFERS) of the count it
runs, and of the count over every row (what it was before the live-rows index).

    python scripts/bench_pg_df.py --url postgresql://... [--size 100000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from robotmem import Memory
from robotmem.search.relevance import document_frequencies
from robotmem.store.postgres.sql import sql_literal, tsquery_literal

_ROWS = """
INSERT INTO memories (collection, type, content, search_text, search_tsv, context, content_hash, confidence,
                      reinforced_at, first_seen, last_seen, created_at, occurred_at, updated_at, status)
SELECT 'default', 'fact', t, t, to_tsvector('simple', t), '{}'::jsonb, md5(i::text), 0.9,
       1.78e9 + i, 1.78e9 + i, 1.78e9 + i, 1.78e9 + i, 1.78e9 + i, 1.78e9 + i,
       CASE WHEN mod(i, 100) < 86 THEN 'superseded' WHEN mod(i, 100) < 88 THEN 'forgotten'
            WHEN mod(i, 100) < 95 THEN 'active' ELSE 'archived' END
FROM (SELECT i, 'arm gripper note w' || mod(i, 101) || ' u' || mod(i, 997) AS t
      FROM generate_series(1, SIZE) AS i) AS s
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL server URL (a fresh schema is made in it)")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--schema", default="bench_pg_df")
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
        admin.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {args.schema}")
    sep = "&" if "?" in args.url else "?"
    url = f"{args.url}{sep}options=-csearch_path%3D{args.schema},public"
    Memory(url, embedder=None).close()  # the schema, at this robotmem's version
    with psycopg.connect(url, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute(_ROWS.replace("SIZE", str(int(args.size))))
        conn.execute("VACUUM ANALYZE memories")
        print(f"{args.size} rows inserted and analysed in {time.perf_counter() - t0:.1f} s")
        for name, in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
                                  "AND schemaname = current_schema() AND indexdef LIKE '%search_tsv%'"):
            print("full-text index:", name)
        for word in ("arm", "w7", "u5"):
            q = tsquery_literal([word], lambda _: [])
            for label, where in (("every row", ""), ("live rows", " AND status IN ('active', 'archived')")):
                sql = f"SELECT count(*) FROM memories WHERE search_tsv @@ {sql_literal(q)}::tsquery{where}"
                plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)]
                print(f"--- {word}, {label}\n" + "\n".join(plan))
    mem = Memory(url, embedder=None)
    for word in ("arm", "w7", "u5"):
        times = []
        with mem._db.read() as c:
            for _ in range(20):
                t0 = time.perf_counter()
                df = document_frequencies(c, [word])
                times.append(time.perf_counter() - t0)
        print(f"document_frequencies([{word!r}]) = {df[word]}: median {1000 * statistics.median(times):.2f} ms, "
              f"min {1000 * min(times):.2f} ms over 20")
    mem.close()


if __name__ == "__main__":
    main()
