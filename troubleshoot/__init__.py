"""troubleshoot: diagnose failing or slow AI training jobs on NVIDIA GPUs."""

__version__ = "0.1.0"
