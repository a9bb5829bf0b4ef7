"""The corpus of malformed experiments (tests/experiments/invalid/, each with the message it must
give on its first line): every one is refused as invalid input naming the file and the place,
before any cluster is asked. tests/testbed/test_runner.py runs them through `kilocard run`."""

from pathlib import Path

import pytest

from chaos import run
from chaos.errors import SpecError

CORPUS = sorted((Path(__file__).parents[1] / "experiments" / "invalid").glob("*.yaml"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line must say what it expects"
    return first.removeprefix("# expect: ")


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_malformed_experiment_is_refused_with_a_clear_error(path):
    with pytest.raises(SpecError) as err:
        run.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    assert expected(path) in message, message
    assert "Traceback" not in message
