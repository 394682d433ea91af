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
    """A table, schema, stylesheet or catalog the code reads at run time must travel in the
    wheel too: under troubleshoot/, and under the folders package-dir maps (rules/, fixers/)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = config["package-data"]
    packages = set(config["packages"])
    # package name -> its folder: troubleshoot.x.y lives in troubleshoot/x/y unless package-dir says otherwise
    folders = {name: REPO.joinpath(*name.split(".")) for name in packages}
    folders.update({name: REPO / folder for name, folder in config["package-dir"].items()})
    missing = []
    for name in ("troubleshoot", *config["package-dir"]):
        for f in folders[name].rglob("*"):
            if not f.is_file() or f.suffix in (".py", ".pyc") or "__pycache__" in f.parts:
                continue
            # The package that holds it: the listed package whose folder is nearest above the file.
            owner = max((n for n, d in folders.items() if d in f.parents), key=lambda n: len(folders[n].parts))
            inside = f.relative_to(folders[owner])
            if not any(inside.match(g) for g in globs.get(owner, ())):
                missing.append(str(f.relative_to(REPO)))
    assert missing == [], f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"
