"""`robotmem ui`: a small local web view of the store (episodes, map, timeline, recall).

The page is static (``static/``, shipped in the package, no build step and nothing
fetched at run time); it reads JSON from ``/api/...``, which reads the store through the
public ``Memory`` API on every request, so episodes a running bridge writes appear live.
"""

from .app import build_app

__all__ = ["build_app"]
