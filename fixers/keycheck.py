"""Install a repository signing key only once its fingerprint is the one the vendor publishes.

    python -m troubleshoot_fixers.keycheck --url URL --fingerprint FPR --out PATH [--dearmor]

The key is fetched into a private temporary folder (mkdtemp: a random name, mode 0700, so no
other local user can swap the file between the check and the install), its primary keys are
read with `gpg --show-keys` in a throw-away home there, and the file is installed only when it
holds exactly the expected key: a file with an extra key (someone else's, signing packages
too) is refused as well. The installed file is written atomically (safeio). Exit 0 installed,
1 refused or failed, with one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

from troubleshoot import safeio

FPR_RE = re.compile(r"^[0-9A-F]{40}$")


class KeyError_(Exception):
    pass


def primary_fingerprints(colons: str) -> list[str]:
    """Fingerprints of the primary keys in `gpg --with-colons --show-keys` output (the `fpr`
    record right after each `pub` record; subkeys' `fpr` follow `sub`)."""
    out, last = [], None
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sub"):
            last = fields[0]
        elif fields[0] == "fpr" and last == "pub" and len(fields) > 9:
            out.append(fields[9].upper())
            last = None
    return out


def _run(argv: list[str], what: str) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=120)
    except FileNotFoundError:
        raise KeyError_(f"{argv[0]}: command not found (needed to {what})") from None
    except subprocess.TimeoutExpired:
        raise KeyError_(f"{argv[0]} timed out ({what})") from None
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise KeyError_(f"could not {what}: {msg[-1] if msg else f'{argv[0]} exited {p.returncode}'}")
    return p


def fetch_verified(url: str, fingerprint: str, dearmor: bool) -> bytes:
    """The key's bytes (dearmored if asked), once it is exactly the expected key."""
    fingerprint = fingerprint.replace(" ", "").upper()
    if not FPR_RE.match(fingerprint):
        raise KeyError_(f"{fingerprint!r} is not a 40-digit OpenPGP fingerprint")
    with tempfile.TemporaryDirectory(prefix="troubleshoot-key-") as d:  # mkdtemp: 0700, random name
        key, home = os.path.join(d, "key"), os.path.join(d, "gnupg")
        os.mkdir(home, 0o700)
        _run(["curl", "-fsSL", "--proto", "=https,file", "--max-filesize", "1048576", "-o", key, url],
             f"download {url}")
        gpg = ["gpg", "--homedir", home, "--batch", "--no-tty", "--quiet"]
        shown = _run(gpg + ["--with-colons", "--show-keys", key], "read the key")
        found = primary_fingerprints(shown.stdout.decode("ascii", "replace"))
        if found != [fingerprint]:
            raise KeyError_(f"refused the key from {url}: it holds {', '.join(found) or 'no key'}, expected exactly "
                            f"{fingerprint}; nothing was installed")
        if not dearmor:
            with open(key, "rb") as f:
                return f.read()
        out = os.path.join(d, "key.gpg")
        _run(gpg + ["--yes", "--output", out, "--dearmor", key], "dearmor the key")
        with open(out, "rb") as f:
            return f.read()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m troubleshoot_fixers.keycheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--fingerprint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dearmor", action="store_true", help="store it binary (apt's signed-by keyrings)")
    args = ap.parse_args(argv)
    try:
        data = fetch_verified(args.url, args.fingerprint, args.dearmor)
        safeio.atomic_write(args.out, data, 0o644)
    except (KeyError_, OSError) as exc:
        msg = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"keycheck: error: {msg}", file=sys.stderr)
        return 1
    print(f"keycheck: installed {args.out} (fingerprint {args.fingerprint.replace(' ', '').upper()} checked)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
