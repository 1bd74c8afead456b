"""``python -m robotmem.mcp [--transport stdio|http] [--host H] [--port P]``."""

import sys

from .cli import main

sys.exit(main())
