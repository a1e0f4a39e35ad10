# ruff: noqa: E501  (a finding's text, one line)
"""A disagreement the two-tenant machine found (issue 38): retention that deletes a finished
run whose history a redaction rewrote failed with the foreign key of its audit record
(``prune_run`` deleted the run's calls, checkpoints and row, not its redaction records)."""

FINDING = "prune('run-a') and gc: the model expects success, the store raised StoreError: FOREIGN KEY constraint failed"
CONFIG = {
    "name": "row07_sqlite_database_encoff",
    "backend": "sqlite",
    "encryption": "off",
    "blobs": "database",
    "secrets": "redact",
    "group_commit": "on",
}
STEPS = [
    (
        "save_fresh",
        {
            "run": 0,
            "change": {
                "message": "PLANTED-x7Q-cobalt-4412",
                "values": {"pending_action": {}, "cursors": {}, "state": {}},
                "labels": {},
                "status": "done",
            },
            "enqueue": False,
        },
    ),
    ("redact", {"whole": True, "run": 0}),
    ("retention_gc", {"run": 0, "keep": None, "keep_for": None, "finished_after": "now"}),
]
