"""Encryption at rest (issue 18), the parts with no I/O: keys, sealing, keyed digests.

- ``keyring``: the key-encryption keys (KEKs) a store is given, each with an
  id, and the separate index key for keyed digests and blind indexes; built
  explicitly from an environment variable, a file or a callable.
- ``sealing``: AES-256-GCM through ``cryptography``. A value is sealed under a
  data key (DEK) with associated data naming its place (store, run, step,
  column), so a ciphertext copied elsewhere fails to open; DEKs are wrapped
  by a KEK, so rotating a KEK rewraps DEKs instead of rewriting rows.
- ``keyed``: HMAC-SHA-256 under the index key, for digests that could reveal
  content and for the blind index on labels.

Not wired into the store yet: ``open_store(url, encryption=...)`` builds on it.
"""
