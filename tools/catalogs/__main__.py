"""python -m tools.catalogs NAME SOURCE_TREE [--version V] [--out FILE]

Regenerates rules/catalogs/NAME.json from a fetched source tree of its emitter (a git checkout
or a release's unpacked tarball). `python -m tools.catalogs --list` names every catalog and the
source it reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.catalogs.common import CatalogError
from tools.catalogs.registry import build, generators


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.catalogs", description=__doc__.split("\n\n")[1])
    ap.add_argument("name", nargs="?", help="the catalog to regenerate")
    ap.add_argument("tree", nargs="?", type=Path, help="the emitter's source tree")
    ap.add_argument("--version", help="the source's release or commit, written into the catalog")
    ap.add_argument("--out", type=Path, help="write here instead of rules/catalogs/NAME.json")
    ap.add_argument("--list", action="store_true", help="list the catalogs and their sources")
    args = ap.parse_args(argv)
    gens = generators()
    if args.list or not args.name:
        for name, mod in sorted(gens.items()):
            print(f"{name}\t{mod.SOURCE}")
        return 0
    if args.tree is None:
        ap.error("a source tree is needed")
    try:
        path = build(args.name, args.tree, args.version, args.out)
    except CatalogError as e:
        print(f"tools.catalogs: error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
