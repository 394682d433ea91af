"""Probes read the machine into facts. Each module reads one area and never raises."""
