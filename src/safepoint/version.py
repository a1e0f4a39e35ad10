"""The version of safepoint, in one place: ``safepoint.__version__`` and the OpenTelemetry scope report it."""

__version__ = "0.1.0"
