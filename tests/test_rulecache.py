"""The whole rule set kept across runs (engine.rulecache): the same rules as a build, built
again whenever anything it was built from changes, and a planted cache file runs no code."""

import os
import pickle
from pathlib import Path

import pytest

from conftest import run_cli
from troubleshoot import model, records, usercache
from troubleshoot.engine import rulecache, ruleset
from troubleshoot.engine.ruleset import load_ruleset

# Each test counts the rule sets kept and the builds: it starts with none kept.
pytestmark = pytest.mark.cold_cache

RULE = """\
rules:
- id: {id}
  symptom: {symptom}
  title: {title}
  severity: error
  match:
    log: ['loss is nan']
  explain: x
  examples: {{match: ["loss is nan"], no_match: ["ok"]}}
"""


def cache_files() -> list[Path]:
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "rulesets"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.fixture
def builds(monkeypatch):
    """How many times the rule set was built rather than read from the cache."""
    count = []
    real = ruleset._build

    def counting(*a, **k):
        count.append(1)
        return real(*a, **k)

    monkeypatch.setattr(ruleset, "_build", counting)
    return count


def warm(*args, **kw):
    """A first run parses the files' YAML and keeps the rule set only from the second one."""
    load_ruleset(*args, **kw)
    return load_ruleset(*args, **kw)


def touch_later(path: Path) -> None:
    """A new mtime whatever the clock's granularity (an edit within the same tick keeps it)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_the_cached_rule_set_is_the_one_built(rules_dir, builds):
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a"),
                   "broken.yaml": "rules: [\n  {id: x\n"})
    assert load_ruleset([d]) and cache_files() == []  # the first run: each file parsed, nothing more kept
    built = load_ruleset([d])
    cached = load_ruleset([d])
    assert len(builds) == 2 and len(cache_files()) == 1
    assert cached.rules == built.rules and len(built.rules) > 300
    assert (cached.taxonomy, cached.packs, cached.overridden, cached.disabled) == \
           (built.taxonomy, built.packs, built.overridden, built.disabled)
    assert [str(p) for p in cached.problems] == [str(p) for p in built.problems]
    assert any("broken.yaml:" in str(p) for p in cached.problems)


def test_every_change_to_what_it_was_built_from_builds_it_again(rules_dir, builds):
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="first title")})
    warm([d])
    f = d / "team.yaml"
    f.write_text(RULE.format(id="team-a", symptom="nan-loss", title="other title"))  # the same size
    touch_later(f)
    assert warm([d]).get("team-a").title == "other title"
    (d / "more.yaml").write_text(RULE.format(id="team-b", symptom="team-symptom", title="b"))
    assert warm([d]).get("team-b") is None  # an unknown symptom id: refused, with a problem
    (d / "symptoms.yaml").write_text("symptoms:\n  team-symptom: a symptom of our own\n")
    assert warm([d]).get("team-b") is not None
    (d / "more.yaml").unlink()
    assert load_ruleset([d]).get("team-b") is None  # nothing to parse: built once and kept
    n = len(builds)
    assert load_ruleset([d]).get("team-b") is None and load_ruleset([d]).get("team-a").title == "other title"
    assert len(builds) == n  # nothing changed: read back
    warm([d], include_shipped=False)
    warm([])
    assert len(builds) == n + 2 and len(cache_files()) == 3  # each set of packs has its own, read back the second time


def test_a_team_folder_is_built_on_the_cached_shipped_rules(rules_dir, builds, monkeypatch):
    """With the shipped rules kept as a set of their own, a team folder builds only its own
    files on top of them: the same rules, overrides, disables, symptoms and problems as a build
    of every file."""
    from troubleshoot.engine import loader

    shipped = warm([]).rules
    target, victim = shipped[0], shipped[4]
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="team-symptom", title="a"),
                   "override.yaml": RULE.format(id=target.id, symptom="nan-loss", title="ours"),
                   "off.yaml": f"disable: [{victim.id}, no-such-rule]\n",
                   "symptoms.yaml": "symptoms:\n  team-symptom: a symptom of our own\n",
                   "broken.yaml": "rules: [\n  {id: x\n"})
    read = []
    real = loader.load_rule_file
    monkeypatch.setattr(loader, "load_rule_file", lambda f, *a: read.append(Path(f)) or real(f, *a))
    on_base = load_ruleset([d])
    assert read and all(d in f.parents for f in read)  # no shipped file read again
    packs = on_base.packs
    assert rulecache.first_packs(rulecache.key(packs, ruleset._files_read), 1) == \
        rulecache.key(packs[:1], ruleset._files_read)  # the shipped set's stamp, from the whole set's
    monkeypatch.setattr(ruleset, "_shipped_base", lambda *a: None)
    read.clear()
    whole = load_ruleset([d])
    assert any(on_base.packs[0].path in f.parents for f in read)  # every file this time, the shipped ones too
    assert on_base.rules == whole.rules and on_base.get(target.id).title == "ours" and on_base.get(victim.id) is None
    assert on_base.get("team-a") is not None
    assert (on_base.taxonomy, on_base.overridden, on_base.disabled, on_base.symptom_origins) == \
           (whole.taxonomy, whole.overridden, whole.disabled, whole.symptom_origins)
    assert [str(p) for p in on_base.problems] == [str(p) for p in whole.problems]
    assert any("no-such-rule" in str(p) for p in on_base.problems) and any("broken.yaml:" in str(p) for p in on_base.problems)


def test_changed_code_builds_it_again(rules_dir, builds, monkeypatch):
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a")})
    warm([d])
    load_ruleset([d])
    assert len(builds) == 2
    real = rulecache.code_stamps
    monkeypatch.setattr(rulecache, "code_stamps", lambda: real() + [("loader.py", (1, 2, 3))])
    load_ruleset([d])
    assert len(builds) == 3


def test_the_config_files_problems_are_told_once(rules_dir, builds):
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a")})
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "troubleshoot" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("rules: not-a-list\n")
    first = [str(p) for p in warm([d]).problems]
    again = [str(p) for p in load_ruleset([d]).problems]
    assert len(builds) == 2 and again == first
    assert sum("must be a list of folders" in p for p in again) == 1


class Boom:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['XDG_CACHE_HOME']}/PWNED",))


def test_a_planted_rule_set_runs_no_code(rules_dir):
    """A cache file with the right stamp but a pickle that names anything besides the rule
    model's classes (a function to call, another class, a rule's held-back texts of the wrong
    kind), or that is cut short, is a missing cache: the rules are built, nothing runs, no
    traceback."""
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a")})
    warm([d])
    (f,) = cache_files()
    head, payload = usercache.unpack_entry(f.read_bytes())
    assert isinstance(rulecache._read(payload, ruleset._OWN_CLASSES), ruleset.RuleSet)
    planted = [pickle.dumps(Boom()), pickle.dumps(os.system), pickle.dumps(ruleset.Pack),
               pickle.dumps(Path("/x")).replace(b"PosixPath", b"WindowsPath"),
               pickle.dumps(rulecache.allowed), payload[: len(payload) // 2], b"not a pickle",
               pickle.dumps(ruleset.RuleSet([], {}))[:-1]]
    # _restore with a class whose texts are not held back, with texts that are not bytes, and
    # with texts that are a pickle of something else
    planted += [_call_pickle(rulecache._restore, (ruleset.Pack, {}, b"")),
                _call_pickle(rulecache._restore, (model.Rule, {}, "text")),
                _call_pickle(rulecache._restore, (model.Rule, {}, pickle.dumps(Boom())))]
    # The command reads the pickle as any cache: it lists the rules, built again, and runs nothing.
    f.write_bytes(usercache.pack_entry(head, planted[0]))
    p = run_cli("rules", "list", "--rules", str(d))
    assert p.returncode == 0 and b"team-a" in p.stdout and b"Traceback" not in p.stderr
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "PWNED").exists()
    for blob in planted:  # the same load, in this process: a miss, never an exception
        f.write_bytes(usercache.pack_entry(head, blob))
        assert load_ruleset([d]).get("team-a") is not None, blob
        assert not (Path(os.environ["XDG_CACHE_HOME"]) / "PWNED").exists()
    f.write_bytes(b"\x00garbage")
    assert load_ruleset([d]).get("team-a") is not None


def _call_pickle(func, args) -> bytes:
    """A pickle that calls `func(*args)` when read."""

    class Call:
        def __reduce__(self):
            return (func, args)

    return pickle.dumps(Call())


def test_a_rules_texts_are_read_when_first_used(rules_dir):
    """A rule read back from the cache holds its explanation, fixes and examples back until one
    is read; then all of them are as built, and the rule equals the built one."""
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a")})
    built = warm([d]).get("team-a")
    cached = load_ruleset([d]).get("team-a")
    assert records.DEFERRED in cached.__dict__ and "explain" not in cached.__dict__
    assert cached.examples == built.examples and cached.explain == "x"
    assert records.DEFERRED not in cached.__dict__ and cached == built
    # a diagnosis made in a forked scan is pickled to the parent: a rule still holding back
    # its texts goes through plain pickle too
    again = pickle.loads(pickle.dumps(load_ruleset([d]).get("team-a")))
    assert again == built


def test_a_cache_others_can_write_is_not_read(rules_dir, builds):
    d = rules_dir({"team.yaml": RULE.format(id="team-a", symptom="nan-loss", title="a")})
    warm([d])
    (f,) = cache_files()
    os.chmod(f, 0o666)
    load_ruleset([d])
    assert len(builds) == 3


def test_only_the_latest_rule_sets_are_kept(tmp_path, builds):
    folders = []
    for i in range(rulecache.KEEP + 3):
        d = tmp_path / f"team-{i}"
        d.mkdir()
        (d / "team.yaml").write_text(RULE.format(id=f"team-{i}", symptom="nan-loss", title="a"))
        folders.append(d)
        warm([d], include_shipped=False)
    assert len(cache_files()) == rulecache.KEEP
    load_ruleset([folders[-1]], include_shipped=False)
    assert len(builds) == 2 * (rulecache.KEEP + 3)  # the newest is still there
