"""Generators of the message catalogs under rules/catalogs/ from the emitters' own source.

Each module here reads one emitter's source tree (or a checked-in excerpt of it) and returns its
entries; `common` applies the mapping to symptoms and actions kept in maps/ and writes the
catalog. Regenerate one with `python -m tools.catalogs NAME SOURCE_TREE`.
"""
