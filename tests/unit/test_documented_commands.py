"""Every kilocard command line README.md and docs/ show parses with the real parser, and the ones
that need no cluster (validate, gameday schedule) run and exit 0: a broken example fails here, not
in a reader's terminal. Optional parts (`[--json]`), alternatives (`a|b`, `--run x | --all`),
pipes and redirections are read as a reader would: the first alternative, nothing optional."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from chaos import cli

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented() -> list[tuple[str, list[str]]]:
    """(where, argv) of each `kilocard` command in the pages' bash blocks."""
    found = []
    for page in PAGES:
        block = False
        lines: list[str] = []
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.startswith("```"):
                block = line.strip() == "```bash"
                continue
            if not block:
                continue
            lines.append(line)
            if line.rstrip().endswith("\\"):
                continue
            text = " ".join(part.rstrip().removesuffix("\\") for part in lines)
            lines = []
            text = re.sub(r"\s#\s.*$", "", text)  # the comment
            text = re.sub(r"\[[^\[\]]*\]", "", text)  # what is optional
            text = text.split(" | ")[0]  # a pipe, or `--run x | --all`: the first alternative
            text = re.split(r"\s\d?>>?\s", text)[0]  # where the shell sends its output
            words = shlex.split(text)
            for i, word in enumerate(words):
                # The program, not an argument (`helm install kilocard deploy/chart/kilocard`).
                if Path(word).name == "kilocard" and (i == 0 or words[i - 1] in ("&&", ";", "sudo", "exec")
                                                      or "=" in words[i - 1]):
                    argv = [w.split("|")[0] if w.startswith("-") or "|" in w else w for w in words[i + 1:]]
                    found.append((f"{page.relative_to(ROOT)}:{number}", argv))
    return found


COMMANDS = documented()


def test_the_pages_show_commands_at_all() -> None:
    assert len(COMMANDS) >= 20 and any(argv[:1] == ["record"] for _, argv in COMMANDS)


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_parses(where: str, argv: list[str]) -> None:
    try:
        cli.build_parser(with_testbed=argv[:1] == ["testbed"]).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: kilocard {shlex.join(argv)}: does not parse (exit {exc.code})")


@pytest.mark.parametrize(("where", "argv"), [(w, a) for w, a in COMMANDS if a[:1] == ["validate"]
                                             or a[:2] == ["gameday", "schedule"]],
                         ids=[w for w, a in COMMANDS if a[:1] == ["validate"] or a[:2] == ["gameday", "schedule"]])
def test_the_documented_commands_that_need_no_cluster_run_clean(where: str, argv: list[str], monkeypatch,
                                                                capsys) -> None:
    monkeypatch.chdir(ROOT)
    files = [a for a in argv if a.endswith((".yaml", ".json"))]
    if any(not (ROOT / f).exists() for f in files):  # a placeholder of the reader's own (f.yaml)
        argv = [a for a in argv if a not in files or (ROOT / a).exists()]
    assert cli.main(argv) == 0, f"{where}: {capsys.readouterr().err}"
