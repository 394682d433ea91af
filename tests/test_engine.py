"""Loader, linter and ranking, on small rule sets written for each case."""

import textwrap

from troubleshoot.engine.diagnose import diagnose, scan_patterns
from troubleshoot.engine.examples import check_examples
from troubleshoot.engine.lint import lint
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.scan import scan_text


def rule(rid, symptom, pattern, severity="error", confidence=0.8, extra=""):
    return textwrap.dedent(f"""\
    - id: {rid}
      symptom: {symptom}
      title: {rid} title
      severity: {severity}
      confidence: {confidence}
      match:
        log: ['{pattern}']
      explain: "{rid} explained"
      examples:
        match: ["{pattern}"]
        no_match: ["nothing"]
    """) + textwrap.indent(textwrap.dedent(extra), "  ")


def load(rules_dir, text):
    d = rules_dir({"r.yaml": text})
    return load_ruleset([d], include_shipped=False, use_config=False)


def run(rs, log):
    return diagnose(rs.rules, scan_text(log, scan_patterns(rs.rules)), None)


def test_cause_outranks_its_consequence_even_when_later_and_surer(rules_dir):
    rs = load(rules_dir, rule("oom", "cuda-oom", "OOM HERE", confidence=0.6)
              + rule("cudnn", "cudnn-cublas-init-failure", "CUDNN_STATUS_NOT_INITIALIZED", confidence=0.95,
                     extra="downstream_of: [cuda-oom]\n"))
    ds = run(rs, "OOM HERE\nmore\nCUDNN_STATUS_NOT_INITIALIZED\n")
    assert [d.rule.id for d in ds] == ["oom", "cudnn"]
    assert ds[1].confidence < 0.95 and "consequence of cuda-oom" in ds[1].notes[0]
    # Alone, the consequence is the diagnosis, at full confidence.
    ds = run(rs, "CUDNN_STATUS_NOT_INITIALIZED\n")
    assert [d.rule.id for d in ds] == ["cudnn"] and ds[0].confidence == 0.95


def test_last_error_beats_early_one_of_equal_confidence(rules_dir):
    rs = load(rules_dir, rule("early", "nan-loss", "EARLY") + rule("late", "nccl-error", "LATE"))
    log = "EARLY\n" + "ok\n" * 1000 + "LATE\n"
    assert [d.rule.id for d in run(rs, log)] == ["late", "early"]


def test_errors_rank_above_warnings(rules_dir):
    rs = load(rules_dir, rule("warn", "io-stall", "SLOW", severity="warning", confidence=0.99)
              + rule("err", "nccl-error", "BROKE", confidence=0.3))
    assert [d.rule.id for d in run(rs, "BROKE\nSLOW\n")] == ["err", "warn"]


def test_repeated_matches_collapse_with_count_and_first_last(rules_dir):
    rs = load(rules_dir, rule("oom", "cuda-oom", "OOM HERE"))
    ds = run(rs, "\n".join(["OOM HERE" if i % 10 == 0 else "x" for i in range(1, 101)]) + "\n")
    assert len(ds) == 1 and ds[0].count == 10 and (ds[0].first_line, ds[0].last_line) == (10, 100)
    assert "matched 10 lines, first 10, last 100" in ds[0].notes


def test_refines_drops_the_generic_rule(rules_dir):
    rs = load(rules_dir, rule("generic", "cuda-oom", "out of memory")
              + rule("specific", "cuda-oom", "CUDA out of memory", extra="refines: [generic]\n"))
    assert [d.rule.id for d in run(rs, "CUDA out of memory\n")] == ["specific"]
    assert [d.rule.id for d in run(rs, "host out of memory\n")] == ["generic"]


def test_with_log_without_log_and_capture_conditions(rules_dir):
    rs = load(rules_dir, textwrap.dedent("""\
    - id: frag
      symptom: cuda-oom
      title: fragmentation
      severity: error
      match:
        log: ['allocate (?P<req>\\d+ GiB).* (?P<unalloc>\\d+ GiB) reserved but unallocated']
        with_log: ['^Traceback']
        without_log: ['expandable_segments:True was set']
        facts: ['bytes(log.unalloc) >= bytes(log.req)']
      explain: "{req} requested, {unalloc} idle"
      examples:
        match: ["Traceback\\nallocate 2 GiB; 3 GiB reserved but unallocated"]
        no_match: ["Traceback\\nallocate 4 GiB; 3 GiB reserved but unallocated"]
    """))
    assert rs.problems == []
    base = "allocate 2 GiB; 3 GiB reserved but unallocated\n"
    assert run(rs, base) == []  # with_log missing
    ds = run(rs, "Traceback\n" + base)
    assert ds and ds[0].explain == "2 GiB requested, 3 GiB idle"
    assert run(rs, "Traceback\n" + base + "expandable_segments:True was set\n") == []
    assert run(rs, "Traceback\nallocate 4 GiB; 3 GiB reserved but unallocated\n") == []
    checked, failures = check_examples(rs.rules)
    assert checked == 2 and failures == []


def test_facts_only_rule_fires_from_facts(rules_dir):
    rs = load(rules_dir, textwrap.dedent("""\
    - id: nouveau
      symptom: nouveau-conflict
      title: nouveau loaded
      severity: error
      match:
        facts: ['kernel.modules.nouveau == true']
      explain: nouveau holds the GPU
    """))
    assert diagnose(rs.rules, None, {"kernel": {"modules": {"nouveau": True}}})[0].rule.id == "nouveau"
    assert diagnose(rs.rules, None, {"kernel": {"modules": {"nouveau": False}}}) == []
    assert diagnose(rs.rules, None, {}) == []  # unknown is not true


def test_loader_reports_every_problem_with_lines(rules_dir):
    rs = load(rules_dir, textwrap.dedent("""\
    - id: Bad_Id
      symptom: no-such-symptom
      title: t
      severity: fatal
      confidence: 3
      downstream_of: [nope]
      match:
        log: ['(unclosed', '(?<=x)y', '(a)\\1']
        facts: ['driver <']
      explain: x
      fixes:
        - fixer: advice
          params: {min_version: 12.10}
      references: [not-a-url]
      bogus: 1
    - id: ok-rule
      symptom: cuda-oom
      title: t
      severity: error
      match: {log: ['x']}
      explain: x
    - id: ok-rule
      symptom: cuda-oom
      title: t
      severity: error
      match: {log: ['x']}
      explain: x
      examples: {match: [x], no_match: [y]}
    """))
    text = "\n".join(str(p) for p in lint(rs))
    for fragment in [":1: rule id 'Bad_Id' is not kebab-case", ":2: rule 'Bad_Id': unknown symptom",
                     ":4: rule 'Bad_Id': severity must be", ":5: rule 'Bad_Id': confidence must be",
                     ":6: rule 'Bad_Id': downstream_of names unknown symptom", ":8: rule 'Bad_Id': regex does not compile",
                     "outside the RE2 subset", ":9: rule 'Bad_Id': condition 'driver <'",
                     ":13: '12.10' is read as the number 12.1", "is not an http(s) URL", ":15: rule 'Bad_Id': unknown key 'bogus'",
                     ":16: rule 'ok-rule': a log rule needs 'examples'"]:
        assert fragment in text, fragment
    assert rs.rules == [] or [r.id for r in rs.rules] == ["ok-rule"]


def test_duplicate_ids_in_one_pack_are_errors(rules_dir):
    d = rules_dir({"a.yaml": rule("same", "cuda-oom", "x"), "b.yaml": rule("same", "cuda-oom", "y")})
    rs = load_ruleset([d], include_shipped=False, use_config=False)
    assert len(rs.rules) == 1
    assert any("duplicate rule id 'same'" in str(p) and "b.yaml:1" in str(p) for p in rs.problems)


def test_lint_flags_patterns_that_match_every_line(rules_dir):
    rs = load(rules_dir, rule("loose", "cuda-oom", ".*") + rule("ordinary", "nan-loss", "loss"))
    text = "\n".join(str(p) for p in lint(rs))
    assert "pattern matches an empty line" in text and "matches ordinary training-log lines" in text


def test_lint_flags_a_pattern_whose_prefilter_form_is_common(rules_dir):
    # `(?i)...\s(nan|-?inf)` once dropped `loss` as a common word: " INFO" then made every INFO
    # line a candidate the verifier checked one by one
    text = "".join(textwrap.dedent(f"""\
        - id: {rid}
          symptom: nan-loss
          title: {rid} title
          severity: warning
          match:
            log: ['{pattern}']
          explain: x
          examples: {{match: ['step 10 loss nan'], no_match: ['step 10 loss 1.2']}}
        """) for rid, pattern in (("nan-or-inf", r"(?i)\bloss\s+(?P<value>nan|-?inf)\b"),
                                  ("nan-only", r"(?i)\bloss\s+(?P<value>nan)\b")))
    problems = [str(p) for p in lint(load(rules_dir, text)) if "prefilter form" in str(p)]
    assert len(problems) == 1 and "rule 'nan-or-inf'" in problems[0]


def test_example_failures_name_rule_and_example(rules_dir):
    rs = load(rules_dir, textwrap.dedent("""\
    - id: wrong-examples
      symptom: cuda-oom
      title: t
      severity: error
      match: {log: ['CUDA out of memory']}
      explain: x
      examples:
        match: ["out of memory"]
        no_match: ["CUDA out of memory"]
    """))
    _, failures = check_examples(rs.rules)
    msgs = [str(f) for f in failures]
    assert any("rule 'wrong-examples': examples.match[0] should fire but did not" in m for m in msgs)
    assert any("examples.no_match[0] should not fire but did" in m for m in msgs)
    assert all(":8:" in m or ":9:" in m for m in msgs)


def test_where_judges_each_line_by_the_captures_it_reads(rules_dir):
    text = textwrap.dedent("""\
    - id: gpu-step-slow
      symptom: cuda-oom
      title: t
      severity: warning
      match:
        log: ['step (?P<step>\\d+) gpu(?P<gpu>\\d+) (?P<kind>\\w+)']
        where: ['log.kind == "slow" and number(log.gpu) > 0']
      explain: x
      examples: {match: ["step 1 gpu1 slow"], no_match: ["step 1 gpu0 slow"]}
    """)
    rs = load(rules_dir, text)
    pats = scan_patterns(rs.rules)
    keep = pats[0].where
    # The same verdict, fresh or remembered, whatever the captures it does not read.
    for _ in range(2):
        assert keep({"step": "1", "gpu": "1", "kind": "slow"}) is True
        assert keep({"step": "2", "gpu": "0", "kind": "slow"}) is False
        assert keep({"step": "3", "gpu": "1", "kind": "fast"}) is False
        assert keep({"step": "4", "gpu": None, "kind": "slow"}) is False
    log = "".join(f"step {i} gpu{i % 3} {'slow' if i % 2 else 'fast'}\n" for i in range(60))
    (d,) = run(rs, log)
    assert d.count == sum(1 for i in range(60) if i % 2 and i % 3)


def test_a_patterns_group_names_are_what_the_group_regex_finds():
    import re

    from troubleshoot.model import LogPattern

    regex = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")
    for source in [r"GPU (?P<gpu>\d+) (?P<_mb9>\d+) MiB (?P<gpu>x)", r"(?P<1st>x)(?P<é>y)(?P<a b>z)(?P<open",
                   r"\(?P<escaped>x\)", "no groups at all", "(?P<>x)(?P<ok>y)"]:
        assert LogPattern(source, 1).groups == tuple(dict.fromkeys(regex.findall(source))), source
