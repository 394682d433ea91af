"""The generators: every module `src_*.py` in this folder, each naming the catalogs it makes.

A generator module defines
    SOURCE: str   -- the emitter's repository or document, for people (`--list`)
    NAMES: tuple[str, ...]   -- the catalogs it makes
    def parse(name: str, tree: Path, version: str | None) -> tuple[dict, list[Entry]]
        the catalog's header (name, source, version, url, and anything else worth keeping)
        and its entries, read from `tree`; raises CatalogError when the tree is not the source.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from tools.catalogs import common


def generators() -> dict[str, ModuleType]:
    out: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("src_"):
            mod = importlib.import_module(f"tools.catalogs.{info.name}")
            for name in mod.NAMES:
                out[name] = mod
    return out


def rows(name: str, tree: Path, version: str | None = None,
         map_path: Path | None = None, strict: bool = True) -> tuple[dict, list[dict]]:
    """The catalog's header and its mapped entries, without writing anything. `strict=False`
    for an excerpt of the source: map keys and groups it does not hold are not errors."""
    mod = generators().get(name)
    if mod is None:
        raise common.CatalogError(f"no generator makes a catalog named {name!r}")
    if not Path(tree).is_dir():
        raise common.CatalogError(f"{tree}: not a folder")
    header, entries = mod.parse(name, Path(tree), version)
    return header, common.apply_map(name, entries, common.load_map(name, map_path), strict)


def build(name: str, tree: Path, version: str | None = None, out: Path | None = None) -> Path:
    header, mapped = rows(name, tree, version)
    return common.write_catalog(name, header, mapped, out)
