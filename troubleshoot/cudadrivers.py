"""NVIDIA's tables of drivers and CUDA versions (data/cuda-drivers.yaml, shipped with the
package), read once: the newest CUDA a driver runs, the oldest driver a CUDA runtime needs, and
whether a driver runs a CUDA runtime natively or through minor-version compatibility."""

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


NATIVE = "native"
MINOR_COMPAT = "minor-version compatibility"


def runs_on(cuda: str, driver_cuda: str | None, driver: str | None = None) -> str | None:
    """How a driver runs a CUDA `cuda` runtime: NATIVE when the driver's own CUDA (`nvidia-smi`'s
    "CUDA Version") is that release or newer; MINOR_COMPAT when it is an older release of the same
    major family, from CUDA 11 on, and the driver is at least the family's minimum (NVIDIA's CUDA
    minor-version compatibility: 11.x on >= 450.80.02, 12.x on >= 525.60.13, 13.x on >= 580);
    None when it does not run it, or a version is not one."""
    from troubleshoot.values import parse_version

    cv = parse_version(cuda)
    dcv = parse_version(driver_cuda) if driver_cuda else None
    if dcv is None and driver:
        found = cuda_of_driver(driver)
        dcv = parse_version(found) if found else None
    if cv is None or dcv is None:
        return None
    if cv <= dcv:
        return NATIVE
    floor = minimum_driver(cuda)
    if cv.parts[0] < 11 or dcv.parts[0] != cv.parts[0] or floor is None:
        return None
    if driver and parse_version(driver) is not None:
        return MINOR_COMPAT if parse_version(driver) >= parse_version(floor) else None
    # Without the driver's own version its CUDA stands for it: any driver of a family's release
    # is past the family's minimum, except an 11.0 one (450.36.06 is older than 450.80.02).
    return MINOR_COMPAT if cv.parts[0] != 11 or dcv > parse_version("11.0") else None
