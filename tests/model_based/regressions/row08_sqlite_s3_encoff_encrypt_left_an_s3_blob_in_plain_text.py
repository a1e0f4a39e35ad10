"""A disagreement the model-based test found in make test's run; replayed by tests/test_model_based.py.

Shrunk by hand from a 7-step script: a process without the keyring saved a run whose message
went to the S3 blob target, then the store was encrypted. S3's put of the blob sealed anew
was sent conditional (If-None-Match), so the server kept the plain object; encrypt reported
the blob sealed and every load of the run failed (BlobCorrupt). Fixed in blobs/s3.py: a
replace is an unconditional put (tests/test_blobs_replace.py).
"""

FINDING = (
    "load('run-a', 0) raised BlobCorrupt: run 'run-a' step 0: blob … is corrupt: "
    "it is stored in plain text, but the store is encrypted"
)
CONFIG = {
    "name": "row08_sqlite_s3_encoff",
    "backend": "sqlite",
    "encryption": "off",
    "blobs": "s3",
    "secrets": "reference",
    "group_commit": "on",
}
_LARGE = "%24secret " * 60  # over the machine's blob threshold: to S3
STEPS = [
    (
        "open_without_keyring",
        {
            "run": 0,
            "change": {
                "message": _LARGE,
                "values": {"pending_action": {}, "cursors": {}, "state": {}},
                "labels": {},
                "status": "paused",
            },
        },
    ),
    (
        "record_call",
        {
            "run": 0,
            "key": 0,
            "existing": False,
            "request": 1,
            "lease": None,
            "result": {"out": _LARGE},
            "usage": 1,
        },
    ),
    ("encrypt", {}),
    ("recorded_call", {"run": 0, "key": 0, "existing": True, "request": 1}),
]
