# stage 1 (old code): learn a memory with 70 point keys; stage 2 (new code): spatial_sort on the 70th
import sys, os
sys.path.insert(0, "/tmp/audit-upgrade")
from common import target
from robotmem import Memory
stage, kind, name = sys.argv[1:4]
t = target(kind, name)
with Memory(embedder=None, **t) as m:
    if stage == "write":
        m.learn("shelf map keyed", context={"spatial": {f"shelf_{i:02d}": [float(i), 1.0, 0.0] for i in range(70)}})
        m.learn("other memory far", context={"spatial": {"shelf_69": [500.0, 1.0, 0.0]}})
    for f in ("spatial.shelf_03", "spatial.shelf_69"):
        tgt = [3.0, 1.0, 0.0] if f.endswith("03") else [69.0, 1.0, 0.0]
        r = m.recall("", spatial_sort={"field": f, "target": tgt, "max_distance": 0.5}, min_confidence=0)
        fl = m.recall("", context_filter={f: {"$exists": True}}, min_confidence=0)
        print(stage, f, "spatial:", [x["content"] for x in r["results"]], "filter:", [x["content"] for x in fl["results"]])
