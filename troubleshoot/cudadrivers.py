"""NVIDIA's tables of drivers and CUDA versions (data/cuda-drivers.yaml, shipped with the
package), read once: the newest CUDA a driver runs, and the oldest driver a CUDA runtime needs."""

from __future__ import annotations

import functools

TABLE = ("data", "cuda-drivers.yaml")


@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    # Shipped tables are read like the Xid catalog: parsed once per change of the file, cached.
    from pathlib import Path

    from troubleshoot.engine.documents import load_data_file

    return load_data_file(Path(__file__).parent.joinpath(*TABLE), "CUDA driver table")


@functools.lru_cache(maxsize=1)
def driver_branches() -> tuple[tuple[int, str], ...]:
    """(driver branch, the newest CUDA it runs), newest branch first."""
    rows = _tables()["driver_branches"]
    return tuple(sorted(((int(branch), str(cuda)) for branch, cuda in rows.items()), reverse=True))


@functools.lru_cache(maxsize=1)
def minimum_drivers() -> tuple[tuple[str, str], ...]:
    """(oldest CUDA release a row covers, the oldest driver that runs it), newest first."""
    from troubleshoot.values import parse_version

    rows = _tables()["minimum_drivers"]
    return tuple(sorted(((str(cuda), str(driver)) for cuda, driver in rows.items()),
                        key=lambda row: parse_version(row[0]), reverse=True))


def minimum_driver(cuda: str) -> str | None:
    """The oldest Linux driver that runs a CUDA `cuda` runtime (`12.4` -> `525.60.13`); None for
    a CUDA older than the table or a version that is not one."""
    from troubleshoot.values import parse_version

    v = parse_version(cuda)
    if v is None:
        return None
    return next((driver for floor, driver in minimum_drivers() if v >= parse_version(floor)), None)


def cuda_of_driver(driver: str) -> str | None:
    """The newest CUDA a driver (`570.86.15`, or its branch `570`) runs; None for a driver older
    than the table or a version that is not one."""
    try:
        major = int(str(driver).split(".")[0])
    except ValueError:
        return None
    return next((cuda for branch, cuda in driver_branches() if major >= branch), None)
