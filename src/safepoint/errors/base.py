"""The root every error safepoint raises on purpose derives from.

See ``safepoint.errors`` for the whole tree.
"""

from __future__ import annotations


class SafepointError(Exception):
    """Root of every error safepoint raises on purpose."""
