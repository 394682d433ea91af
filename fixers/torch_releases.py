"""PyTorch releases as data: the torchvision and torchaudio of each release, its CUDA builds on
download.pytorch.org/whl/cuXYZ, and the CPython versions it has wheels for.

Sources: pytorch.org/get-started/previous-versions (the install commands of each release: wheel
versions carry the build as a local label, e.g. torch-2.7.0+cu126; releases before 2.0 were
installed with `--extra-index-url`, later ones with `--index-url`) and the "Release Compatibility
Matrix" of RELEASE.md in pytorch/pytorch (Python range per release; the experimental newest
Python counts, since its wheels are published). The last patch release of each minor series,
newest first, down to 1.11, the first release with per-CUDA package indexes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    torch: str
    torchvision: str
    torchaudio: str
    cuda: tuple[str, ...]  # the CUDA builds, as MAJOR.MINOR
    python: tuple[str, str]  # the oldest and the newest CPython (MAJOR.MINOR) with wheels
    index_option: str = "--index-url"  # how pytorch.org's command names the build's index

    @property
    def series(self) -> str:
        return ".".join(self.torch.split(".")[:2])


RELEASES = (
    Release("2.9.0", "0.24.0", "2.9.0", ("12.6", "12.8", "13.0"), ("3.10", "3.14")),
    Release("2.8.0", "0.23.0", "2.8.0", ("12.6", "12.8", "12.9"), ("3.9", "3.13")),
    Release("2.7.1", "0.22.1", "2.7.1", ("11.8", "12.6", "12.8"), ("3.9", "3.13")),
    Release("2.6.0", "0.21.0", "2.6.0", ("11.8", "12.4", "12.6"), ("3.9", "3.13")),
    Release("2.5.1", "0.20.1", "2.5.1", ("11.8", "12.1", "12.4"), ("3.9", "3.13")),
    Release("2.4.1", "0.19.1", "2.4.1", ("11.8", "12.1", "12.4"), ("3.8", "3.12")),
    Release("2.3.1", "0.18.1", "2.3.1", ("11.8", "12.1"), ("3.8", "3.12")),
    Release("2.2.2", "0.17.2", "2.2.2", ("11.8", "12.1"), ("3.8", "3.12")),
    Release("2.1.2", "0.16.2", "2.1.2", ("11.8", "12.1"), ("3.8", "3.11")),
    Release("2.0.1", "0.15.2", "2.0.2", ("11.7", "11.8"), ("3.8", "3.11")),
    Release("1.13.1", "0.14.1", "0.13.1", ("11.6", "11.7"), ("3.7", "3.10"), "--extra-index-url"),
    Release("1.12.1", "0.13.1", "0.12.1", ("10.2", "11.3", "11.6"), ("3.7", "3.10"), "--extra-index-url"),
    Release("1.11.0", "0.12.0", "0.11.0", ("10.2", "11.3"), ("3.7", "3.10"), "--extra-index-url"),
)
