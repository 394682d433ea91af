"""Run a job under troubleshoot: pass its output through, watch it, diagnose it."""
