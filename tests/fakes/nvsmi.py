"""Replay a recorded `nvidia-smi -q` as NVML, for machines without a GPU (tests/fixtures/machines/*,
sources in each SOURCE.md). The replay itself is product code: troubleshoot.paste.nvsmi_q."""

from troubleshoot.paste.nvsmi_q import ReplayNVML as FakeNVML, parse  # noqa: F401
