"""Mutation testing of the verdict code: mutmut (3.x) mutates the functions the contracts name as
deciding each verdict (`judge` in each CONTRACTS entry: probes/, chaos/judgement.py, and the
verdict parts of chaos/stop.py and chaos/guards.py), runs the unit tests against each mutant, and writes
the figures into docs/verdicts.md (its mutation section): mutants generated, killed, surviving,
and each survivor with why it is equivalent (bench/mutation-equivalents.yaml, keyed by function
and the mutated line) or marked unexplained. Not part of the pass/fail run.

    .venv/bin/python bench/mutation.py [--max-children 2] [--no-write] [--only 'probes.kv.*']

Configuration: [tool.mutmut] in pyproject.toml (the unit tests only, one process per mutant).
mutmut keeps its work in mutants/ (ignored by git). Each run starts afresh: mutmut keeps which test
reaches which function from its first run and re-learns it only for tests it has not seen, so a test
that changed would keep its old reach and a mutant it now kills would be counted as surviving.
`--reuse` keeps mutants/ (only when no test changed since).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chaos import contracts  # noqa: E402 - after the path: run as a script from anywhere

PAGE = ROOT / "docs" / "verdicts.md"
EQUIVALENTS = ROOT / "bench" / "mutation-equivalents.yaml"
FINGERPRINTS = ROOT / "bench" / "mutation-fingerprints.json"  # each deciding function's source, as mutated
MUTMUT = ROOT / ".venv" / "bin" / "mutmut"
SEP = "ǁ"  # mutmut's separator between a class and its method in a mangled name
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
          24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", None: "not checked", 37: "type check"}


def globs() -> dict[str, str]:
    """The mangled-name pattern of each deciding function (module.function, module.Class for all
    of its methods, module.Class.method)."""
    found = {}
    for dotted in contracts.deciding():
        parts = dotted.split(".")
        module = ".".join(parts[:2])
        rest = parts[2:]
        if len(rest) == 2:
            found[dotted] = f"{module}.x{SEP}{rest[0]}{SEP}{rest[1]}__mutmut_*"
        elif rest[0][:1].isupper() or rest[0].startswith("_") and rest[0][1:2].isupper():
            found[dotted] = f"{module}.x{SEP}{rest[0]}{SEP}*__mutmut_*"
        else:
            found[dotted] = f"{module}.x_{rest[0]}__mutmut_*"
    return found


def results(patterns: dict[str, str]) -> dict[str, dict[str, str]]:
    """Per deciding function: each of its mutants' status."""
    statuses: dict[str, int | None] = {}
    for meta in (ROOT / "mutants").rglob("*.py.meta"):
        statuses.update(json.loads(meta.read_text())["exit_code_by_key"])
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for key, code in statuses.items():
        for dotted, pattern in patterns.items():
            if fnmatch.fnmatchcase(key, pattern):
                found[dotted][key] = STATUS.get(code, "suspicious")
    return found


def mutated_line(key: str) -> str:
    """The line a mutant changed, as it reads after the change (from `mutmut show`)."""
    shown = subprocess.run([str(MUTMUT), "show", key], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    added = [line[1:].strip() for line in shown.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return " / ".join(added) or "?"


def equivalents() -> dict[str, list[dict[str, str]]]:
    data = yaml.safe_load(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else None
    return data or {}


def explain(function: str, line: str, known: dict[str, list[dict[str, str]]]) -> str | None:
    for entry in known.get(function, []):
        if entry["line"] == line:
            return entry["why"]
    return None


def section(found: dict[str, dict[str, str]], seconds: float, command: str) -> str:
    known = equivalents()
    total = Counter(s for mutants in found.values() for s in mutants.values())
    rows, survivors = [], []
    equivalent = 0
    for function in sorted(found):
        counts = Counter(found[function].values())
        rows.append(f"| `{function}` | {sum(counts.values())} | {counts['killed']} | {counts['survived']} | "
                    f"{counts['timeout']} | {counts['no tests']} |")
        for key, status in sorted(found[function].items()):
            if status != "survived":
                continue
            line = mutated_line(key)
            why = explain(function, line, known)
            equivalent += why is not None
            cell = line.replace("|", "\\|")
            survivors.append(f"| `{key.split('.', 2)[-1]}` | `{cell}` | {why or '**unexplained**'} |")
    counted = sum(total.values()) - equivalent  # the non-equivalent mutants
    caught = total["killed"] + total["timeout"]
    lines = [contracts.MUTATION_MARK, "## Mutation testing", "",
             f"Written by `{command}` ({time.strftime('%Y-%m-%d')}, at commit {_commit()}, {seconds / 60:.0f} min): "
             f"mutmut {_version()} over the functions the contracts above name as deciding, against the unit tests. "
             f"Each function's source as it was mutated is fingerprinted in `{FINGERPRINTS.relative_to(ROOT)}`; "
             "tests/unit/test_contracts.py fails once one of them changes, until this is run again.",
             "",
             f"- mutants generated: {sum(total.values())}; killed {total['killed']}, timed out {total['timeout']} "
             f"(a mutant that hangs the tests is caught too); surviving {total['survived']}; reached by no test "
             f"{total['no tests']}",
             f"- equivalent (each explained below): {equivalent}; killed or timed out, of the non-equivalent: "
             f"**{100 * caught / counted if counted else 100.0:.1f} %**",
             "", "| function | mutants | killed | survived | timeout | no tests |",
             "| --- | --- | --- | --- | --- | --- |", *rows, ""]
    if survivors:
        lines += ["Each survivor: the mutated line, and why it changes no verdict (or **unexplained**). A survivor "
                  "that is not equivalent gets a test that kills it (the `edges` cases of "
                  "tests/unit/test_verdict_golden.py were written so), or the code it exposes is made plainer.", "",
                  "| mutant | mutated line | why |", "| --- | --- | --- |", *survivors, ""]
    return "\n".join(lines)


def _commit() -> str:
    """The commit the figures are of, `+changes` when the tree differed from it."""
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return f"`{head.strip() or '?'}`" + (" with uncommitted changes" if dirty else "")


def _version() -> str:
    said = subprocess.run([str(MUTMUT), "--version"], capture_output=True, text=True).stdout
    found = re.search(r"(\d+\.\d+\.\d+)", said)
    return found[1] if found else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print the section, leave docs/verdicts.md alone")
    parser.add_argument("--reuse", action="store_true", help="keep mutants/ from the last run (no test changed)")
    parser.add_argument("--only", metavar="GLOB[,GLOB]", help="only the deciding functions matching one "
                        "(probes.kv.*): printed, never written (the page holds the whole run)")
    args = parser.parse_args()
    wanted = args.only.split(",") if args.only else ["*"]
    patterns = {f: p for f, p in globs().items() if any(fnmatch.fnmatchcase(f, g) for g in wanted)}
    if not patterns:
        parser.error(f"--only {args.only}: no deciding function matches (the contracts' `judge` names them)")
    args.no_write = args.no_write or args.only is not None
    started = time.monotonic()
    if not args.reuse:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    subprocess.run([str(MUTMUT), "run", "--max-children", str(args.max_children), *patterns.values()], cwd=ROOT,
                   check=False)
    found = results(patterns)
    if not any(status == "killed" for mutants in found.values() for status in mutants.values()):
        print("bench/mutation.py: not one mutant killed: the unit tests did not pass unmutated (mutmut's output "
              "above says which); docs/verdicts.md left as it was", file=sys.stderr)
        return 1
    text = section(found, time.monotonic() - started, "bench/mutation.py")
    print(text)
    if not args.no_write:
        page = PAGE.read_text()
        PAGE.write_text(page[:page.index(contracts.MUTATION_MARK)] + text)
        FINGERPRINTS.write_text(json.dumps(contracts.fingerprints(), indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
