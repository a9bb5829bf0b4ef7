"""docs/verdicts.md is the contracts beside the code, and every verdict has one that names the code
deciding it and the outcomes that code can give."""

import importlib
import re
from pathlib import Path

from chaos import contracts, guards, stop
from probes import chaostoolkit

PAGE = Path(__file__).parents[2] / "docs" / "verdicts.md"


def test_the_page_is_current():
    assert PAGE.read_text() == contracts.markdown(PAGE.read_text()), (
        "docs/verdicts.md is stale: regenerate it with `python -m chaos.contracts docs/verdicts.md`")


def test_every_probe_stop_condition_guard_and_the_runner_have_a_contract():
    names = [c.name for c in contracts.contracts()]
    assert len(names) == len(set(names))
    assert set(chaostoolkit.__all__) <= set(names)
    assert set(stop.CONDITIONS) <= set(names)
    limits = {n.strip() for c in guards.CONTRACTS for n in c.name.split(",")}
    assert limits == set(guards.Limits.__dataclass_fields__)
    assert {"the run's verdict", "expect", "fault landed"} <= set(names)


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[i:]:
            found = getattr(found, attribute)
        return found
    raise AssertionError(f"{dotted}: nothing to import")


def test_every_contract_names_code_that_exists_and_decides():
    for c in contracts.contracts():
        assert c.asserts and c.time_zero and c.interval and c.missing and c.exceptions and c.outcomes, c.name
        for dotted in c.judge:
            assert callable(_resolve(dotted)), dotted


def test_every_outcome_the_code_gives_is_in_its_modules_contracts():
    for module in contracts.MODULES:
        named = {o for c in module.CONTRACTS for o, _ in c.outcomes} | {"unknown"}
        given = set(re.findall(r'outcome="(\w+)"', Path(module.__file__).read_text()))
        assert given <= named, (module.__name__, given - named)

