"""Every file kilocard reads goes through chaos.input_file: a key given twice, aliases that expand
past a bound or hold themselves, a number that is not finite, and an oversized file are refused
naming the file and the line, in bounded time and memory; everything else reads as YAML reads it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from chaos import input_file
from chaos.errors import SpecError


def refused(text: str, as_json: bool = False) -> str:
    with pytest.raises(SpecError) as err:
        input_file.parse(text, "f.yaml", as_json=as_json)
    message = str(err.value)
    assert message.startswith("f.yaml: "), message
    return message


def laughs(levels: int, width: int = 10) -> str:
    """The "billion laughs" shape: each level a list of `width` aliases of the one before."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_key_given_twice_is_refused_naming_both_lines():
    text = "configuration:\n  budget_seconds: 60\n  hold: 10\n  budget_seconds: 600\n"
    assert refused(text) == "f.yaml: line 4: key 'budget_seconds' is given twice (first at line 2); say it once"


def test_a_key_given_twice_at_the_top_or_in_a_list_item_is_refused_too():
    assert "line 3: key 'title'" in refused("title: a\nmethod: []\ntitle: b\n")
    assert "line 3: key 'name' is given twice (first at line 2)" in refused("method:\n- name: a\n  name: b\n")


def test_a_merge_key_and_a_key_beside_it_are_not_a_duplicate():
    data = input_file.parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert data["m"] == {"x": 3, "y": 2}


@pytest.mark.parametrize("number", [".inf", "-.inf", ".Inf", ".NaN", ".nan"])
def test_a_number_that_is_not_finite_is_refused_with_its_line(number):
    assert refused(f"title: t\nbudget_seconds: {number}\n") == (
        f"f.yaml: line 2: {number!r} is not a finite number (a time, a count or a threshold is one)")


def test_the_word_inf_as_text_is_text():
    assert input_file.parse("a: inf\nb: '.inf'\n", "f.yaml") == {"a": "inf", "b": ".inf"}


def test_aliases_that_expand_past_the_bound_are_refused_before_anything_walks_them():
    message = refused(laughs(9))  # 10**9 values once expanded, in 400 bytes
    assert f"its aliases expand to more than {input_file.LIMIT_VALUES} values" in message


def test_aliases_that_expand_within_the_bound_read_as_yaml_reads_them():
    text = laughs(4)  # 10**4 values
    assert input_file.parse(text, "f.yaml") == yaml.safe_load(text)


def test_an_alias_inside_what_it_names_is_refused():
    assert "an alias refers to a value that holds it" in refused("a: &a [1, *a]\n")
    assert "an alias refers to a value that holds it" in refused("a: &a {x: *a}\n")


def test_nesting_past_the_bound_is_refused():
    depth = input_file.LIMIT_DEPTH
    assert input_file.parse("[" * (depth - 1) + "]" * (depth - 1), "f.yaml") is not None
    assert f"nested more than {depth} levels deep" in refused("[" * (depth + 1) + "]" * (depth + 1))


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * input_file.LIMIT_BYTES + "\n")
    with pytest.raises(SpecError, match=rf"big.yaml: {input_file.LIMIT_BYTES + 3} bytes, over the"):
        input_file.read(path)


def test_a_syntax_error_says_where_the_parser_was_and_what_it_read():
    assert refused("title: t\ndescription: [d\n") == (
        "f.yaml: not valid YAML: did not find expected ',' or ']' (line 3, column 1), "
        "while parsing a flow sequence from line 2, column 14")


def test_two_documents_in_one_file_are_refused():
    assert "not valid YAML" in refused("a: 1\n---\nb: 2\n")


def test_json_gets_the_same_rules():
    assert refused('{"a": 1, "a": 2}', as_json=True) == "f.yaml: key 'a' is given twice in one object; say it once"
    assert "Infinity is not a finite number" in refused('{"a": Infinity}', as_json=True)
    assert "NaN is not a finite number" in refused('{"a": [NaN]}', as_json=True)
    assert refused("{", as_json=True).startswith("f.yaml: not valid JSON: line 1: ")


def test_a_missing_file_and_a_folder_are_said_as_such(tmp_path):
    with pytest.raises(SpecError, match="nothing.yaml: no such file"):
        input_file.read(tmp_path / "nothing.yaml")
    with pytest.raises(SpecError, match="no such file"):
        input_file.read(tmp_path)


values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@given(values)
def test_any_document_without_a_refused_shape_reads_as_yaml_and_json_read_it(value):
    assert input_file.parse(yaml.safe_dump(value), "f.yaml") == yaml.safe_load(yaml.safe_dump(value))
    assert input_file.parse(json.dumps(value), "f.json", as_json=True) == json.loads(json.dumps(value))


def test_kilocard_validate_refuses_the_billion_laughs_in_bounded_memory(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text("title: t\ndescription: d\nmethod: []\nconfiguration:\n"
                    + "".join(f"  {line}\n" for line in laughs(9).splitlines()))
    assert path.stat().st_size < 1024
    # The peak of the child alone (RUSAGE_CHILDREN of a process that ran only it).
    measure = ("import resource, subprocess, sys; "
               "r = subprocess.run([sys.executable, '-m', 'chaos.cli', 'validate', sys.argv[1]], capture_output=True, "
               "text=True, timeout=120); print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
               "repr(r.stdout + r.stderr))")
    out = subprocess.run([sys.executable, "-c", measure, str(path)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[2]).stdout.split(" ", 2)
    code, peak_kb, said = int(out[0]), int(out[1]), out[2]
    assert code == 2, said
    assert "its aliases expand to more than" in said and "Traceback" not in said, said
    # The interpreter and kilocard's imports take 60 MB (280 MB in mutmut's instrumented copy); the
    # file nothing more (before it was bounded, validate was still expanding it after 40 s).
    assert peak_kb < 512 * 1024, f"validate peaked at {peak_kb // 1024} MB"
