"""A disagreement make soak found; replayed by tests/test_model_based.py.

Shrunk by hand from the soak's 16-step script: a stale lease renewed by a
heartbeat kept its own short period, so it expired while the next step's
worker polled, and the worker took one run more than the model had counted.
The machine now waits such a lease out, as it does a stale claim's.
"""

FINDING = "an old worker handled 2 runs; the model lets it take ['run-b']"
CONFIG = {
    "name": "row09_postgres_inline_encon",
    "backend": "postgres",
    "encryption": "on",
    "blobs": "inline",
    "secrets": "reference",
    "group_commit": "off",
}
_CHANGE = {
    "message": "plain",
    "values": {"pending_action": {}, "cursors": {}, "state": {}},
    "labels": {},
    "status": "running",
}
STEPS = [
    ("save_fresh", {"run": 0, "change": _CHANGE}),
    ("save_fresh", {"run": 1, "change": _CHANGE}),
    ("enqueue", {"run": 0}),
    ("claim", {"live": False}),
    ("enqueue", {"run": 1}),
    ("heartbeat", {"lease": 0}),
    ("old_worker", {}),
]
