"""Layered rule packs: shipped rules, then team folders, each able to add, override, disable.

Order (later layers win on the same id):
  1. shipped rules (`rules/` in the repository, the `troubleshoot_rules` package when installed)
  2. folders from plugins (the `troubleshoot_rule_dirs` hook)
  3. folders listed under `rules:` in the user config file ($XDG_CONFIG_HOME/troubleshoot/config.yaml)
  4. folders in $TROUBLESHOOT_RULES (os.pathsep-separated)
  5. folders given with --rules, in command-line order
A `disable:` list in any file removes those ids, whichever layer defined them.
"""

from __future__ import annotations

import os
from pathlib import Path

from troubleshoot.engine import catalogs, conditions, rulecache
from troubleshoot.engine.shipped import shipped_rules_dir
from troubleshoot.errors import Problem
from troubleshoot.model import Origin, Rule
from troubleshoot.records import field, record

SHIPPED = "shipped"
TAXONOMY_FILE = "symptoms.yaml"
DATA_FILES = (TAXONOMY_FILE, "xid-catalog.yaml")  # shipped tables, not rule files


@record(frozen=True)
class Pack:
    name: str
    path: Path


@record
class RuleSet:
    rules: list[Rule]
    taxonomy: dict[str, str]
    problems: list[Problem] = field(default_factory=list)
    packs: list[Pack] = field(default_factory=list)
    overridden: dict[str, list[Origin]] = field(default_factory=dict)
    disabled: dict[str, Origin] = field(default_factory=dict)
    symptom_origins: dict[str, Origin] = field(default_factory=dict)  # team symptom ids: where each is defined

    def get(self, rule_id: str) -> Rule | None:
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "error"]


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "troubleshoot" / "config.yaml"


def config_rule_dirs(problems: list[Problem]) -> list[Path]:
    path = config_path()
    if not path.is_file():
        return []
    from troubleshoot.engine import yamldoc

    try:
        data, _ = yamldoc.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(path, None, f"cannot read config: {exc}", level="warning"))
        return []
    except yamldoc.YamlError as exc:
        problems.append(Problem(path, exc.line, exc.message, level="warning"))
        return []
    if data is None:
        return []
    dirs = data.get("rules") if isinstance(data, dict) else None
    if dirs is None:
        return []
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        problems.append(Problem(path, getattr(data, "line_of", lambda k: None)("rules"), "'rules' must be a list of folders", level="warning"))
        return []
    return [(path.parent / os.path.expanduser(d)).resolve() for d in dirs]


def env_rule_dirs() -> list[Path]:
    raw = os.environ.get("TROUBLESHOOT_RULES", "")
    return [Path(os.path.expanduser(p)) for p in raw.split(os.pathsep) if p.strip()]


def rule_files(folder: Path) -> list[Path]:
    """The rule files under `folder` (itself, when it is a file), sorted: what `rglob("*")`
    finds with a .yaml or .yml suffix that is a file (into no linked folder), in a walk by
    os.scandir, which knows each entry's kind without a stat (every start lists the packs)."""
    if folder.is_file():
        return [folder]
    found: list[str] = []
    folders = [str(folder)]
    while folders:  # a stack, not recursion: a folder tree of any depth
        try:
            with os.scandir(folders.pop()) as listing:
                entries = list(listing)
        except OSError:  # as rglob: a folder that cannot be read holds nothing
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif _rule_name(entry.name) and entry.is_file():
                    found.append(entry.path)
            except OSError:
                continue
    return sorted(Path(f) for f in found)


def _rule_name(name: str) -> bool:
    dot = name.rfind(".")  # a suffix as Path.suffix reads it: ".yaml" alone has none
    return dot > 0 and name[dot:] in (".yaml", ".yml") and name not in DATA_FILES


def load_ruleset(extra_dirs: list[str | Path] = (), include_shipped: bool = True,
                 plugin_dirs: list[Path] | None = None, use_config: bool = True) -> RuleSet:
    """Load every layer; problems are collected, never raised (a broken team file is skipped)."""
    problems: list[Problem] = []
    shipped = shipped_rules_dir()
    packs: list[Pack] = []
    if include_shipped:
        packs.append(Pack(SHIPPED, shipped))
    for d in plugin_dirs or []:
        packs.append(Pack(f"plugin:{d}", Path(d)))
    if use_config:
        packs += [Pack(f"config:{d}", d) for d in config_rule_dirs(problems)]
    packs += [Pack(f"env:{d}", d) for d in env_rule_dirs()]
    packs += [Pack(str(d), Path(d)) for d in extra_dirs]

    # Built once for each set of packs and files (rulecache): what the build adds to `problems`
    # is cached with it, what came before (the config file's) is not.
    # The shipped tables are read whatever the packs (team rules name shipped symptoms and Xids).
    # A catalog's entries are part of the patterns that name it ({catalog:NAME}).
    stamp = rulecache.key(packs, _files_read, also=[*(shipped / name for name in DATA_FILES), *catalogs.files()])
    cached = rulecache.load(packs, stamp, _OWN_CLASSES)
    if cached is not None:
        cached.problems[:0] = problems
        return cached
    # Here, not at the top: a run whose rule set comes from the cache never imports the loader.
    from troubleshoot.engine.symptoms import load_taxonomy

    base = _shipped_base(packs, stamp)
    ruleset, parsed = _build(packs, load_taxonomy(shipped / TAXONOMY_FILE), base)
    if not parsed:
        # Kept only once every file's YAML came from its cache: a first run (a new machine, an
        # edited file) already pays for parsing, and most runs right after an edit are the
        # user's next edit's.
        rulecache.save(packs, stamp, ruleset, _OWN_CLASSES)
    ruleset.problems[:0] = problems
    return ruleset


def _files_read(pack: Pack) -> list[Path]:
    """Every file the build reads in one pack: its rule files and team symptom files."""
    path = pack.path
    if not path.exists():
        return []
    files = rule_files(path)
    if pack.name != SHIPPED and path.is_dir():
        files += sorted(path.rglob(TAXONOMY_FILE))
    return files


def _shipped_base(packs: list[Pack], stamp: tuple) -> RuleSet | None:
    """The shipped rules alone, from their cache, for a set of packs that starts with them and
    adds others: a team folder given (or edited) builds only its own files on top of them
    instead of the three hundred shipped rules again. None when they are not cached as a set of
    their own, or carry problems or disables that the layers above could change the meaning of."""
    if len(packs) < 2 or packs[0].name != SHIPPED:
        return None
    base = rulecache.load(packs[:1], rulecache.first_packs(stamp, 1), _OWN_CLASSES)
    if base is None or base.problems or base.disabled:
        return None
    return base


def _build(packs: list[Pack], taxonomy: dict[str, str], base: RuleSet | None = None) -> tuple[RuleSet, bool]:
    """The rule set of `packs`, and whether a rule file's YAML had to be parsed (it was not in
    the cache). `base`: the first pack's rule set, already built (_shipped_base)."""
    from troubleshoot.engine.loader import load_rule_file
    from troubleshoot.engine.patterncheck import save_checked
    from troubleshoot.engine.symptoms import load_team_symptoms

    problems: list[Problem] = []
    parsed = False

    # Team symptom ids first: a rule may use an id from any folder's symptoms.yaml.
    taxonomy = dict(taxonomy)
    symptom_origins: dict[str, Origin] = {}
    for pack in packs:
        if pack.name == SHIPPED or not pack.path.is_dir():
            continue
        for f in sorted(pack.path.rglob(TAXONOMY_FILE)):
            found, trouble = load_team_symptoms(f, taxonomy)
            problems += trouble
            for sid, (desc, line) in found.items():
                taxonomy[sid] = desc
                symptom_origins[sid] = Origin(str(f), line, pack.name)

    effective: dict[str, Rule] = {}
    overridden: dict[str, list[Origin]] = {}
    disables: list[tuple[str, Origin]] = []
    if base is not None:
        effective = {r.id: r for r in base.rules}
        overridden = {k: list(v) for k, v in base.overridden.items()}
        packs_to_read = packs[1:]
    else:
        packs_to_read = packs
    for pack in packs_to_read:
        if not pack.path.exists():
            problems.append(Problem(pack.path, None, "rule folder does not exist"))
            continue
        seen_in_pack: dict[str, Origin] = {}
        for f in rule_files(pack.path):
            rf = load_rule_file(f, pack.name, taxonomy)
            parsed = parsed or rf.parsed
            problems += rf.problems
            disables += [(rid, Origin(str(f), ln, pack.name)) for rid, ln in rf.disable]
            for rule in rf.rules:
                if rule.id in seen_in_pack:
                    problems.append(Problem(f, rule.origin.line,
                                            f"duplicate rule id {rule.id!r} (first at {seen_in_pack[rule.id]})"))
                    continue
                seen_in_pack[rule.id] = rule.origin
                if rule.id in effective:
                    overridden.setdefault(rule.id, []).append(effective[rule.id].origin)
                effective[rule.id] = rule
    disabled: dict[str, Origin] = {}
    for rid, origin in disables:
        if effective.pop(rid, None) is not None:
            disabled[rid] = origin
        elif rid not in disabled:
            problems.append(Problem(origin.path, origin.line, f"disable names unknown rule id {rid!r}", level="warning"))
    rules = list(effective.values())
    problems += _set_problems(rules)
    save_checked()
    return RuleSet(rules=rules, taxonomy=taxonomy, problems=problems, packs=packs, overridden=overridden,
                   disabled=disabled, symptom_origins=symptom_origins), parsed


def _set_problems(rules: list[Rule]) -> list[Problem]:
    """Checks that need every rule: references between rules."""
    ids = {r.id for r in rules}
    out = []
    for r in rules:
        for ref in r.refines:
            if ref not in ids:
                out.append(Problem(r.origin.path, r.origin.line, f"rule {r.id!r}: refines unknown rule {ref!r}", level="warning"))
    return out


def fact_paths(rule: Rule) -> list[str]:
    out: list[str] = []
    for c in rule.facts:
        out += [p for p in conditions.paths(c.tree) if p not in out]
    return out


# What a cached rule set is made of besides the rule model (rulecache.allowed).
_OWN_CLASSES = (RuleSet, Pack)
