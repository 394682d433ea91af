"""The wheel carries every package: pyproject.toml lists them by hand (package-dir maps three
folders), so a subpackage left out of the list is missing from a non-editable `pip install .`."""

import tomllib

from conftest import REPO


def test_every_subpackage_of_troubleshoot_is_listed():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "troubleshoot").rglob("__init__.py")}
    assert found, "no package found under troubleshoot/"
    assert found - listed == set(), f"add to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
    for top, folder in config["package-dir"].items():
        assert (REPO / folder / "__init__.py").is_file() and top in listed
