import pytest

from troubleshoot.engine import yamldoc


def test_lines_are_kept_for_keys_and_items():
    data, traps = yamldoc.load("a: 1\nb:\n  - x\n  - y\n")
    assert traps == []
    assert data.line_of("a") == 1 and data.line_of("b") == 2
    assert data["b"].line_of(0) == 3 and data["b"].line_of(1) == 4


@pytest.mark.parametrize("text, fragment", [
    ("v: 12.10\n", "'12.10' is read as the number 12.1"),
    ("v: no\n", "'no' is read as a boolean"),
    ("v: On\n", "'On' is read as a boolean"),
    ("v: 1:30\n", "another base"),
    ("v: 0755\n", "another base"),
])
def test_yaml11_traps_are_reported(text, fragment):
    _, traps = yamldoc.load(text)
    assert len(traps) == 1 and fragment in traps[0].message and traps[0].line == 1


def test_quoted_values_and_plain_numbers_are_fine():
    data, traps = yamldoc.load("a: '12.10'\nb: 0.5\nc: true\nd: 525\n")
    assert traps == []
    assert data == {"a": "12.10", "b": 0.5, "c": True, "d": 525}


def test_duplicate_keys_are_reported_with_both_lines():
    data, traps = yamldoc.load("id: a\nx: 1\nid: b\n")
    assert data["id"] == "a"
    assert traps[0].line == 3 and "duplicate key 'id' (first at line 1)" in traps[0].message


def test_invalid_yaml_names_the_line():
    with pytest.raises(yamldoc.YamlError) as exc:
        yamldoc.load("a: [1, 2\nb: 3\n")
    assert exc.value.line is not None and "invalid YAML" in exc.value.message


def test_billion_laughs_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for name in "bcdefghi":
        bomb += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
        prev = name
    with pytest.raises(yamldoc.YamlError) as exc:
        yamldoc.load(bomb)
    assert "aliases" in exc.value.message


def test_deep_nesting_is_refused():
    with pytest.raises(yamldoc.YamlError):
        yamldoc.load("a: " + "[" * 200 + "]" * 200 + "\n")


def test_unsafe_tags_are_never_constructed():
    data, _ = yamldoc.load("a: !!python/object/apply:os.system ['touch /tmp/pwned']\n")
    # Composed, never constructed: the tag is inert, and nothing ran.
    assert isinstance(data["a"], list)
