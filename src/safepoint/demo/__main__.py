"""``python -m safepoint.demo [STORE_URL]``."""

from __future__ import annotations

import sys

from .script import main

sys.exit(main(*sys.argv[1:2]))
