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


def test_every_data_file_of_troubleshoot_is_in_package_data():
    """A table, schema or stylesheet the code reads at run time must travel in the wheel too."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = config["package-data"]
    packages = set(config["packages"])
    missing = []
    for f in (REPO / "troubleshoot").rglob("*"):
        if not f.is_file() or f.suffix in (".py", ".pyc") or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(REPO)
        # The package that holds it: the nearest listed package above the file.
        owner = next(".".join(p.parts) for p in rel.parents if ".".join(p.parts) in packages)
        inside = f.relative_to(REPO.joinpath(*owner.split(".")))
        if not any(inside.match(g) for g in globs.get(owner, ())):
            missing.append(str(rel))
    assert missing == [], f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"
