"""README's first command exactly as a newcomer runs it, from a stopped testbed, timed.

    .venv/bin/python bench/first_command.py [--runs 3] [--json out.json]

Each run takes the local testbed down (the default state folder and ports, as README's command
uses them), then runs the first line of README's first code block through bash in the checkout,
as typed, with nothing waited for by hand, and times it from the start to: the testbed's fleet
Ready (its pods), the fleet serving at its steady state, the game day's first experiment started,
and the command's end; with its exit code and its last line (the report's path). The testbed is
taken down after each run, so the next starts from nothing again. No established tool runs this
command, so there is no ratio to print: the figures are kilocard's own, run after run. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KILOCARD = ROOT / ".venv" / "bin" / "kilocard"
# What the command prints on its way, by the moment it marks.
MARKS = {"fleet Ready": re.compile(r"fleet Ready in"),
         "fleet serving": re.compile(r"fleet serving at its steady state"),
         "first step": re.compile(r"step-1\s+experiment started")}


def first_command(readme: Path = ROOT / "README.md") -> str:
    """The first line of README's first ```bash block, its comment cut off."""
    text = readme.read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.splitlines()[0].split("   #", 1)[0].strip()


def down() -> None:
    subprocess.run([str(KILOCARD), "testbed", "down"], cwd=ROOT, capture_output=True, text=True, check=True)


def one_run(command: str) -> dict[str, object]:
    down()
    started = time.monotonic()
    seen: dict[str, float] = {}
    lines: list[str] = []
    proc = subprocess.Popen(["bash", "-c", command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        for mark, pattern in MARKS.items():
            if mark not in seen and pattern.search(line):
                seen[mark] = round(time.monotonic() - started, 1)
                print(f"  {seen[mark]:>7.1f} s  {line.strip()[:150]}", flush=True)
    code = proc.wait()
    took = round(time.monotonic() - started, 1)
    down()
    return {"exit": code, "seconds": took, "marks": seen, "last_line": lines[-1] if lines else "",
            "steps": [line for line in lines if re.search(r"step-\d+\s+(passed|failed|aborted|skipped)", line)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    command = first_command()
    print(f"README's first command: {command}")
    runs = []
    for i in range(args.runs):
        print(f"run {i + 1} of {args.runs}, from a stopped testbed:", flush=True)
        result = one_run(command)
        runs.append(result)
        print(f"run {i + 1}: exit {result['exit']} in {result['seconds']} s; "
              f"{len(result['steps'])} steps ended (passed: {sum(' passed' in s for s in result['steps'])}); "
              f"last line: {result['last_line'][:150]}", flush=True)
    times = [float(r["seconds"]) for r in runs]  # type: ignore[arg-type]
    print(f"exit codes {[r['exit'] for r in runs]}; seconds min {min(times):.0f}, median "
          f"{statistics.median(times):.0f}, max {max(times):.0f}")
    for mark in MARKS:
        at = [r["marks"][mark] for r in runs if mark in r["marks"]]  # type: ignore[operator,index]
        if at:
            print(f"  to {mark}: median {statistics.median(at):.1f} s (of {len(at)} runs)")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "runs": runs}, indent=2) + "\n")
    sys.exit(max(int(r["exit"]) for r in runs))  # type: ignore[call-overload]


if __name__ == "__main__":
    main()
