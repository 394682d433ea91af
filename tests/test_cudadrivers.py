"""NVIDIA's driver and CUDA tables shipped as data (troubleshoot/data/cuda-drivers.yaml): the
CUDA version a pasted driver stands for, and the oldest driver a CUDA runtime needs."""

import pytest

from troubleshoot import cudadrivers, paste

# Every row the table is known to hold: a pasted driver of these branches must keep meaning the
# same CUDA version.
KNOWN = {580: "13.0", 575: "12.9", 570: "12.8", 560: "12.6", 555: "12.5", 550: "12.4", 545: "12.3", 535: "12.2",
         530: "12.1", 525: "12.0", 520: "11.8", 515: "11.7", 510: "11.6", 495: "11.5", 470: "11.4", 465: "11.3",
         460: "11.2", 455: "11.1", 450: "11.0", 440: "10.2", 418: "10.1", 410: "10.0", 396: "9.2", 384: "9.0"}


def test_the_table_holds_every_known_row_newest_branch_first():
    rows = cudadrivers.driver_branches()
    assert KNOWN.items() <= dict(rows).items()
    assert [b for b, _ in rows] == sorted((b for b, _ in rows), reverse=True)
    assert all(cuda.count(".") == 1 and cuda.replace(".", "").isdigit() for _, cuda in rows)


@pytest.mark.parametrize("driver,cuda", [
    ("580.65.06", "13.0"), ("535.104.05", "12.2"), ("470.82.01", "11.4"), ("545", "12.3"),
    ("549.1", "12.3"),  # a branch not in the table: the newest CUDA of the branch below it
    ("999.1", "13.0"),  # newer than the table: at least what its newest branch runs
    ("383.11", None), ("unknown", None), ("", None),
])
def test_a_driver_stands_for_the_newest_cuda_of_its_branch(driver, cuda):
    assert cudadrivers.cuda_of_driver(driver) == cuda


def test_a_pasted_driver_without_cuda_version_gets_it_from_the_table():
    # `python -m torch.utils.collect_env` names the driver, not the CUDA version it runs
    got = paste.read("PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\n"
                     "Nvidia driver version: 470.82.01\n")
    assert got.facts["nvml"]["driver_version"] == "470.82.01"
    assert got.facts["nvml"]["cuda_driver_version"] == "11.4"
    assert got.lines["nvml.cuda_driver_version"] == got.lines["nvml.driver_version"]


# The oldest driver each CUDA runtime needs, as the framework fixer has always proposed it.
MINIMUM = {"13.0": "580", "12.0": "525.60.13", "11.0": "450.80.02", "10.2": "440.33", "10.1": "418.39",
           "10.0": "410.48", "9.2": "396.26", "9.0": "384.81"}


@pytest.mark.parametrize("cuda,driver", [
    *MINIMUM.items(),
    ("13.1", "580"), ("12.8", "525.60.13"), ("11.8", "450.80.02"),  # minor-version compatibility
    ("8.0", None), ("x", None),
])
def test_a_cuda_runtime_needs_the_oldest_driver_of_its_row(cuda, driver):
    from troubleshoot_fixers.framework import driver_floor

    assert cudadrivers.minimum_driver(cuda) == driver == driver_floor(cuda)


@pytest.mark.parametrize("cuda, driver_cuda, driver, how", [
    ("11.8", "11.8", "520.61.05", cudadrivers.NATIVE),
    ("11.3", "11.4", "470.82.01", cudadrivers.NATIVE),
    ("11.8", "11.4", "470.82.01", cudadrivers.MINOR_COMPAT),  # any 11.x on >= 450.80.02
    ("11.8", "11.0", "450.80.02", cudadrivers.MINOR_COMPAT),
    ("11.8", "11.0", "450.36.06", None),  # CUDA 11.0's own driver, older than the family's minimum
    ("11.8", "11.0", None, None),  # an 11.0 driver of unknown version may be that one
    ("11.8", "11.4", None, cudadrivers.MINOR_COMPAT),
    ("12.8", "12.2", "535.104.05", cudadrivers.MINOR_COMPAT),  # any 12.x on >= 525.60.13
    ("12.4", "11.8", "520.61.05", None),  # another major version: never
    ("13.0", "12.9", "575.51.03", None),
    ("10.2", "10.1", "418.39", None),  # before CUDA 11 there is no minor-version compatibility
    ("12.4", None, "550.54.15", cudadrivers.NATIVE),  # the driver's CUDA from its branch
    ("x", "12.4", "550.54.15", None),
])
def test_how_a_driver_runs_a_cuda_runtime(cuda, driver_cuda, driver, how):
    assert cudadrivers.runs_on(cuda, driver_cuda, driver) == how
