"""Fixers turn a diagnosis into a plan; the executor shows, applies, verifies and undoes it."""
