"""A disagreement the model-based test found once its ``redact`` operation was added (issue 37).

Shrunk by hand from a 30-step script: a run holding the planted value was redacted on a plain
store (its audit record's check value a plain digest), then the store was encrypted. Records
are checked keyed under the index key on an encrypted store, and encrypt did not key them, so
the record read as edited (``intact`` False) and verify would report the sanctioned rewrite as
tampering. Fixed in store/ops/redacting.py (``key_records``, called by the reseal of each run;
tests/test_redact_encrypt.py).
"""

FINDING = "redactions('run-a') holds 1 records (intact: [False]); the model expects 1, intact"
CONFIG = {
    "name": "row06_sqlite_files_encoff",
    "backend": "sqlite",
    "encryption": "off",
    "blobs": "files",
    "secrets": "reference",
    "group_commit": "off",
}
STEPS = [
    (
        "save_fresh",
        {
            "run": 0,
            "enqueue": False,
            "change": {
                "message": "plain PLANTED-x7Q-cobalt-4412",
                "values": {"pending_action": {}, "cursors": {}, "state": {"a": "PLANTED-x7Q-cobalt-4412"}},
                "labels": {},
                "status": "running",
            },
        },
    ),
    ("redact", {"whole": True, "run": 0}),
    ("encrypt", {}),
    ("redact", {"whole": True, "run": 0}),  # nothing left to find: its update reads every record
]
