"""The crash rig: run an agent in a child process and SIGKILL it at an exact point.

What both the demo (``safepoint demo``, a crash shown to a person) and the
crash-test kit (``safepoint.testing.crash``, crashes checked in CI) are built
on — a package of its own so that the demo needs nothing from ``safepoint.testing``:

* ``process`` — the parent side: ``AgentProcess`` starts a child, reads the
  lines it prints (``saved <step>``, ``effect …``, ``result …``) and kills it;
  ``kill_at_boundary``, ``kill_in_save``, ``kill_after``, ``kill_after_effect``, ``resume``;
* ``child`` — the child side for any agent entry point (``EntrySpec``,
  ``python -m safepoint.crashrig.child``);
* ``statements`` — ``StatementKiller``, the store trace that kills a child inside a save;
* ``ledger`` — ``Ledger``, the outside world a killed agent's side effects land in;
* ``fake_model`` — the deterministic model the scripted agents ask.

Users import these from ``safepoint.testing.crash``.
"""
