"""``python -m robotmem``: the MCP server over stdio (what MCP client configs launch).

With arguments it is the ordinary CLI (``python -m robotmem serve --transport http`` ...).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        from .cli.serve import main as serve

        return serve([])
    from .cli.main import main as cli_main

    return int(cli_main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
