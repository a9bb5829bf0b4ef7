"""A Markdown summary of a run: what a pull-request comment or a chat message carries."""

from __future__ import annotations

from chaos.report import hints, trend
from chaos.report.journal import SYMPTOM_COLUMNS, Run


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary(run: Run) -> str:
    lines = [f"# {run.title}", "", f"**{run.verdict}** (exit {run.exit_code}): {run.reason}", "",
             f"run `{run.run_id or '-'}`, experiment `{run.experiment_file}`, cluster {run.cluster}", ""]
    # What the plan foresaw before anything was applied (the load against the KV cache left).
    lines += [f"Plan warned: {_cell(w)}" for w in run.plan.get("warnings") or []]
    if run.plan.get("warnings"):
        lines.append("")
    if run.faults:
        lines += ["| fault | target | state |", "|---|---|---|"]
        lines += [f"| {f.kind} | {_cell(f.target)} | {f.state} |" for f in run.faults]
        lines.append("")
    if run.checks:
        lines += ["| when | probe | result | reason |", "|---|---|---|---|"]
        lines += [f"| {c.phase} | {_cell(c.name)} | {'ok' if c.ok else '**failed**'} | {_cell(c.reason)} |"
                  for c in run.checks]
        lines.append("")
    if run.symptom_rows:  # a replay: the incident's symptoms, recorded against observed
        lines += ["| " + " | ".join(SYMPTOM_COLUMNS) + " |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in run.symptom_rows]
        lines.append("")
    worst = trend.slowest(run)
    if worst:
        lines += [f"Slowest recovery: {worst.seconds:.1f} s of a {worst.budget:g} s budget ({worst.check}).", ""]
    for c in run.checks:
        found = hints.hint(c, run)
        if found:
            lines += [f"**Fix for {c.name}:**", "", "```", found, "```", ""]
    return "\n".join(lines)
