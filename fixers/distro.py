"""Which distribution the machine being fixed runs: from the snapshot's `host` facts (its
/etc/os-release ID and ID_LIKE), or this machine's /etc/os-release only when no snapshot was
given (then this machine is the one being fixed). Never this machine's tools for another's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from troubleshoot_fixers.facts import fact
from troubleshoot.fixes.plan import Advice

# os-release IDs (and words of PRETTY_NAME, for snapshots older than host.os_id) by family.
FAMILIES = (
    ("debian", ("debian", "ubuntu", "linuxmint", "mint", "pop", "raspbian", "kali", "elementary")),
    ("redhat", ("rhel", "red hat", "rocky", "almalinux", "alma", "centos", "fedora", "amzn", "amazon", "ol", "oracle")),
    ("suse", ("suse", "sles", "sled", "opensuse", "opensuse-leap", "opensuse-tumbleweed")),
    ("arch", ("arch", "manjaro", "endeavouros")),
)
SUPPORTED = "Debian/Ubuntu, RHEL/Rocky/Alma/Fedora, SUSE, Arch"
# os-release(5)'s character sets: ID and ID_LIKE words are a-z 0-9 . _ -; VERSION_ID also A-Z
# and ~. Other text never reaches the repository URLs and package names built from them.
OS_ID = re.compile(r"[a-z0-9._-]{1,64}")
OS_ID_LIKE = re.compile(r"[a-z0-9._ -]{1,200}")
OS_VERSION = re.compile(r"[A-Za-z0-9._~-]{1,64}")


def _field(value, shape: re.Pattern, lower: bool = False) -> str | None:
    text = str(value).lower() if lower and value is not None else value
    return text if isinstance(text, str) and shape.fullmatch(text) else None


@dataclass(frozen=True)
class Distro:
    family: str | None  # debian, redhat, suse, arch; None: another, or unknown
    id: str | None  # os-release ID: ubuntu, rhel, rocky, fedora, sles, opensuse-leap, arch...
    version: str | None  # os-release VERSION_ID
    name: str  # for messages

    @property
    def major(self) -> int | None:
        m = re.match(r"\d+", self.version or "")
        return int(m.group(0)) if m else None


def _os_release() -> dict[str, str]:
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return {}
    from troubleshoot.probes.host import os_release_fields

    return os_release_fields(text)


def _family_of(words: str) -> str | None:
    words = words.lower()
    tokens = set(re.split(r"[^a-z0-9-]+", words)) | set(re.split(r"[^a-z0-9]+", words))
    for family, names in FAMILIES:
        if any(n in tokens or (" " in n and n in words) for n in names):
            return family
    return None


def detect(snapshot) -> Distro:
    if snapshot:
        os_id, like = fact(snapshot, "host", "os_id"), fact(snapshot, "host", "os_id_like")
        version, name = fact(snapshot, "host", "os_version_id"), fact(snapshot, "host", "os")
        pretty = str(name or "")
    else:
        rel = _os_release()
        os_id, like, version, pretty = rel.get("ID"), rel.get("ID_LIKE"), rel.get("VERSION_ID"), rel.get("PRETTY_NAME", "")
    os_id, like, version = _field(os_id, OS_ID, lower=True), _field(like, OS_ID_LIKE, lower=True), \
        _field(version, OS_VERSION)
    pretty = "".join(c for c in pretty if c.isprintable())[:120]
    # ID first (fedora is redhat, opensuse is suse), then what it derives from, then the name.
    family = None
    for words in (str(os_id or ""), str(like or ""), pretty):
        family = _family_of(words) if words else None
        if family:
            break
    if not os_id and family == "arch":
        os_id = "arch"
    return Distro(family, str(os_id).lower() if os_id else None, str(version) if version else None,
                  pretty or str(os_id or "") or ("the snapshot's machine (no host facts)" if snapshot
                                                 else "this machine (no /etc/os-release)"))


def family(snapshot) -> str | None:
    return detect(snapshot).family


def unsupported(what: str, by_hand: str, snapshot) -> Advice:
    d = detect(snapshot)
    if d.family not in (None, "arch") and (d.id is None or d.major is None):
        # A known family whose release the facts do not name (a snapshot older than host.os_id):
        # the package repository's URL names the release, so no command can be given.
        why = (f"{d.name}: the facts do not say which release this is (host.os_id and host.os_version_id, "
               "from /etc/os-release; probe the machine again with this version of troubleshoot), so no "
               f"command to {what} can be given here")
    else:
        why = f"{d.name}: not a distribution troubleshoot knows how to {what} on ({SUPPORTED}); unsupported"
    return Advice(f"{why}. Here is what to do by hand: {by_hand}")
