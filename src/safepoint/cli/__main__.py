"""``python -m safepoint.cli``: the ``safepoint`` command where no script was installed."""

from safepoint.cli import main

main()
