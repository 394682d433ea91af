"""Value parsers shared by conditions and reports: versions and byte sizes."""

from __future__ import annotations

from functools import total_ordering

from troubleshoot.lazyre import lazy

_VERSION = lazy(r"^\s*v?(\d+(?:\.\d+)*)(?:[-+._ ]?[0-9A-Za-z.+-]*)?\s*$")
_VERSION_STRICT = lazy(r"^\s*v?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.+-]*)?\s*$|^\s*\d+\s*$")


@total_ordering
class Version:
    """A dotted version compared component-wise; trailing zeros do not matter (12.1 == 12.1.0)."""

    __slots__ = ("parts", "text")

    def __init__(self, parts: tuple[int, ...], text: str):
        self.parts = parts
        self.text = text

    def _key(self) -> tuple[int, ...]:
        parts = list(self.parts)
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    def __eq__(self, other) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other: "Version") -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"version({self.text!r})"

    def __str__(self) -> str:
        return self.text


def looks_like_version(text: str) -> bool:
    return bool(_VERSION_STRICT.match(text))


def parse_version(text: str) -> Version | None:
    """'470.82.01' -> (470, 82, 1); '2.1.0+cu121' -> (2, 1, 0); '11040' (CUDA int) stays 11040."""
    m = _VERSION.match(str(text))
    if not m:
        return None
    return Version(tuple(int(p) for p in m.group(1).split(".")), str(text).strip())


_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": 1000, "kb": 1000, "kib": 1 << 10,
    "m": 1000**2, "mb": 1000**2, "mib": 1 << 20,
    "g": 1000**3, "gb": 1000**3, "gib": 1 << 30,
    "t": 1000**4, "tb": 1000**4, "tib": 1 << 40,
}
_BYTES = lazy(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(value) -> int:
    """'2.14 GiB' -> 2297807503; '512MB' -> 512000000; 1024 -> 1024. ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        return int(value)
    m = _BYTES.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a byte size: {value!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
