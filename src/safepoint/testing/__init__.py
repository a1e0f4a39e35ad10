"""Shipped test kits: the scripted agent, crash-test helpers and the backend conformance suite."""
