"""A control loop's recall beside the server's other work: what must not land inside its run.

An import holds the GIL for as long as it runs. ``Memory`` imports consolidation (scipy), outcome
statistics and faiss only when first used, so a server that imported them then stalled every
recall it was answering: the first ``end_session`` held the GIL 140-180 ms (docs/benchmarks.md,
"A control loop's recall beside writers"). The server imports them while it warms up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from robotmem.mcp.runtime import LATE_IMPORTS

REPO_ROOT = Path(__file__).resolve().parents[3]

#: A fresh interpreter: this test process may have imported any of them already.
_WARM_UP_THEN_LIST_MODULES = """
import json, sys
import anyio
from robotmem.config import Config
from robotmem.mcp.runtime import LATE_IMPORTS, MemoryRuntime

async def main() -> None:
    runtime = MemoryRuntime(Config.load(embeddings="off"))
    async with runtime.lifespan():
        before = [name for name in LATE_IMPORTS if name in sys.modules]
        await runtime.warmed()
        after = [name for name in LATE_IMPORTS if name in sys.modules]
    print(json.dumps({"before": before, "after": after}))

anyio.run(main)
"""


def test_the_server_imports_what_tools_import_late_while_it_warms_up_not_in_a_call(robotmem_home: Path) -> None:
    env = {**os.environ, "ROBOTMEM_HOME": str(robotmem_home),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-c", _WARM_UP_THEN_LIST_MODULES], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=300, check=True)
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    # Opening the store imports none of them: otherwise this would test nothing.
    assert modules["before"] == []
    assert modules["after"] == list(LATE_IMPORTS)
