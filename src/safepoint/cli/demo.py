"""``safepoint demo``: the scripted agent, killed mid-run and resumed, to see safepoint work."""

from __future__ import annotations

import sys

import click

from safepoint.store import DEFAULT_URL


@click.command()
@click.option("--store", "store_url", envvar="SAFEPOINT_STORE", default=DEFAULT_URL, show_default=True)
def demo(*, store_url: str) -> None:
    """Run the scripted agent, SIGKILL it mid-run, resume it in a fresh process."""
    from safepoint.demo import main as run_demo  # noqa: PLC0415  # only this command needs it

    sys.exit(run_demo(store_url))
