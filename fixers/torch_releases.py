"""PyTorch releases as data: the torchvision and torchaudio of each release, and the CUDA
builds on download.pytorch.org/whl/cuXYZ (pytorch.org/get-started/previous-versions; wheel
versions carry the build as a local label, e.g. torch-2.7.0+cu126). Newest first."""

RELEASES = (
    # torch, torchvision, torchaudio, CUDA builds
    ("2.9.0", "0.24.0", "2.9.0", ("12.6", "12.8", "13.0")),
    ("2.8.0", "0.23.0", "2.8.0", ("12.6", "12.8", "12.9")),
    ("2.7.1", "0.22.1", "2.7.1", ("11.8", "12.6", "12.8")),
    ("2.7.0", "0.22.0", "2.7.0", ("11.8", "12.6", "12.8")),
    ("2.6.0", "0.21.0", "2.6.0", ("11.8", "12.4", "12.6")),
    ("2.5.1", "0.20.1", "2.5.1", ("11.8", "12.1", "12.4")),
    ("2.4.1", "0.19.1", "2.4.1", ("11.8", "12.1", "12.4")),
    ("2.3.1", "0.18.1", "2.3.1", ("11.8", "12.1")),
    ("2.2.2", "0.17.2", "2.2.2", ("11.8", "12.1")),
    ("2.1.2", "0.16.2", "2.1.2", ("11.8", "12.1")),
    ("2.0.1", "0.15.2", "2.0.2", ("11.7", "11.8")),
)
