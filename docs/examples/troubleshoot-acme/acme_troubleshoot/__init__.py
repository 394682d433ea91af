"""ACME's troubleshoot plugin."""
