"""NVIDIA's table of the newest CUDA each driver branch runs (data/cuda-drivers.yaml, shipped with
the package), read once, and the CUDA version a driver version stands for."""

from __future__ import annotations

import functools
from importlib import resources

TABLE = ("data", "cuda-drivers.yaml")


@functools.lru_cache(maxsize=1)
def driver_branches() -> tuple[tuple[int, str], ...]:
    """(driver branch, the newest CUDA it runs), newest branch first."""
    import yaml  # only a log that names a driver without its CUDA version needs the table

    folder, name = TABLE
    text = resources.files("troubleshoot").joinpath(folder).joinpath(name).read_text(encoding="utf-8")
    rows = yaml.safe_load(text)["driver_branches"]
    return tuple(sorted(((int(branch), str(cuda)) for branch, cuda in rows.items()), reverse=True))


def cuda_of_driver(driver: str) -> str | None:
    """The newest CUDA a driver (`570.86.15`, or its branch `570`) runs; None for a driver older
    than the table or a version that is not one."""
    try:
        major = int(str(driver).split(".")[0])
    except ValueError:
        return None
    return next((cuda for branch, cuda in driver_branches() if major >= branch), None)
