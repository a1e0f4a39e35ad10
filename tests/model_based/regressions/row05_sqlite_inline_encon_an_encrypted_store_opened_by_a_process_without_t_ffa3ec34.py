# ruff: noqa: E501  (generated: the steps are data, one per line)
"""A disagreement make soak found; replayed by tests/test_model_based.py."""

FINDING = "an encrypted store opened by a process without the keyring did not raise EncryptedStore at open: its save was acknowledged"
CONFIG = {
    "name": "row05_sqlite_inline_encon",
    "backend": "sqlite",
    "encryption": "on",
    "blobs": "inline",
    "secrets": "reference",
    "group_commit": "on",
}
STEPS = [
    (
        "open_without_keyring",
        {
            "run": 0,
            "change": {
                "message": "plain",
                "values": {"pending_action": {}, "cursors": {}, "state": {}},
                "labels": {},
                "status": "running",
            },
        },
    ),
]
