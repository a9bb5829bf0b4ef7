"""The report's figures, drawn headless with matplotlib and embedded as SVG text (the HTML needs
no network and no side files). Each takes a Run (or two, or many) and returns SVG, or None when
the run has nothing to draw."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from chaos.report.journal import SPANS, Run, Series  # noqa: E402

FAULT_SHADE = "#f4a261"
WORST = "#c1121f"
OTHERS = "#8d99ae"
PHASE_COLOURS = {"gone": "#e76f51", "created": "#adb5bd", "scheduled": "#457b9d", "started": "#2a9d8f",
                 "ready": "#8ab17d"}
PHASE_LABELS = {"gone": "draining (deleted -> gone)", "created": "recreated (deleted -> new pod)",
                "scheduled": "scheduling", "started": "image pull, container start", "ready": "loading to Ready"}
MODEL_COLOURS = ("#264653", "#2a9d8f", "#e9c46a", "#f4a261", "#6d597a", "#457b9d", "#b56576", "#588157")


def _svg(fig: Figure) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG sits inside HTML


def _fault_windows(ax: Any, run: Run, origin: float, end: float, label: bool = True) -> None:
    for i, f in enumerate(x for x in run.faults if x.applied_at):
        start = f.applied_at - origin
        stop = (f.ended_at - origin) if f.ended_at else end
        ax.axvspan(start, max(stop, start + 0.2), color=FAULT_SHADE, alpha=0.22, lw=0,
                   label=("fault applied -> reverted" if label and i == 0 else None))


def slo(run: Run, series: Series) -> str:
    """One SLO verdict's series, x in seconds after the fault: every replica (the worst in red),
    the threshold, the blind window, the deadline, and the faults' windows shaded."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    end = max([t for t, _ in series.points] + [series.budget])
    _fault_windows(ax, run, series.fault_at, end)
    names = sorted({n for _, values in series.points for n in values})
    peak = max((v for _, values in series.points for v in values.values()), default=series.threshold)
    for name in names:
        xs = [t for t, values in series.points if name in values]
        ys = [values[name] for _, values in series.points if name in values]
        worst = name == series.worst
        ax.plot(xs, ys, color=WORST if worst else OTHERS, lw=2.2 if worst else 0.8, alpha=1 if worst else 0.6,
                label=(f"worst: {name}" if worst else None), zorder=3 if worst else 2)
    ax.axhline(series.threshold, color="black", ls="--", lw=1, label=f"threshold {series.threshold:g}")
    ax.axvspan(0, series.blind_until, color="#cccccc", alpha=0.35, lw=0, hatch="//",
               label=f"blind window ({series.blind_until:g} s)")
    if series.budget:
        ax.axvline(series.budget, color="#6a040f", ls=":", lw=1.4, label=f"budget {series.budget:g} s")
    if series.breach_after is not None:
        ax.axvline(series.breach_after, color=WORST, lw=0.8, alpha=0.7)
    if series.recovered_after is not None:
        ax.axvline(series.recovered_after, color="#2d6a4f", lw=1.2, label=f"back under at {series.recovered_after:g} s")
    if peak > 20 * series.threshold:
        ax.set_yscale("log")
    ax.set_xlabel("seconds after the fault")
    ax.set_ylabel(series.indicator or "value")
    ax.set_title(f"{series.check}: {series.outcome}", fontsize=10)
    ax.legend(fontsize=7, loc="upper right", framealpha=0.85)
    ax.grid(alpha=0.25)
    return _svg(fig)


def _gantt(ax: Any, run: Run, rows: list[dict[str, Any]], slo_back: bool = True) -> None:
    for y, replica in enumerate(rows):
        for phase, since in SPANS:
            if replica.get(phase) is not None and replica.get(since) is not None:
                start = float(replica[since])
                # The old pod's drain runs beside its replacement's start: upper half, lower half.
                ax.barh(y - 0.17 if phase == "gone" else y + 0.17, max(float(replica[phase]) - start, 0.05),
                        left=start, height=0.32, color=PHASE_COLOURS[phase], edgecolor="white", lw=0.5)
    for s in run.series if slo_back else ():
        if s.recovered_after is not None and run.first_fault:
            back = s.fault_at + s.recovered_after - run.first_fault
            ax.axvline(back, color="#2d6a4f", ls="--", lw=1.2)
            ax.text(back, len(rows) - 0.4, f" SLO back ({s.check})", fontsize=7, color="#2d6a4f", va="bottom")
    ax.set_yticks(range(len(rows)), [f"{r.get('pod', '?')}\n-> {r.get('replacement') or 'none'} "
                                     f"({r.get('node') or '-'})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds after the first fault")
    ax.grid(axis="x", alpha=0.25)
    ax.legend(handles=[Patch(color=c, label=PHASE_LABELS[p]) for p, c in PHASE_COLOURS.items()],
              fontsize=7, loc="lower right", framealpha=0.85)


def recovery(run: Run) -> str | None:
    """Per replica: drained, recreated, scheduled, started, Ready; and when each SLO came back."""
    if not run.recovery:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.45 * len(run.recovery)))
    if run.first_fault:
        end = max(float(r.get(p) or 0) for r in run.recovery for p, _ in SPANS)
        _fault_windows(ax, run, run.first_fault, end, label=False)
    _gantt(ax, run, list(run.recovery))
    ax.set_title("recovery of each replica", fontsize=10)
    return _svg(fig)


def recorded_recovery(run: Run, rows: list[dict[str, Any]]) -> str | None:
    """The incident's own recovery (as `kilocard record` read it from Events), on the same axes."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.45 * len(rows)))
    _gantt(ax, run, rows, slo_back=False)
    ax.set_title("recovery the incident recorded (from Events: no Ready there)", fontsize=10)
    return _svg(fig)


def placement(run: Run) -> str | None:
    """Nodes (rows) by cards (columns), before and after, coloured by model: the replicas that
    moved are outlined, cards out of service crossed, cordoned nodes named in red."""
    before, after = run.placement.get("before") or [], run.placement.get("after") or []
    if not before and not after:
        return None
    names = sorted({n["name"] for n in before} | {n["name"] for n in after})
    models = sorted({p["model"] for side in (before, after) for n in side for p in n["pods"]})
    colour = {m: MODEL_COLOURS[i % len(MODEL_COLOURS)] for i, m in enumerate(models)}
    moved = {r.get("pod") for r in run.recovery} | {r.get("replacement") for r in run.recovery}
    faulted = {f.node for f in run.faults if f.node}
    width = max([n["capacity"] for side in (before, after) for n in side] + [1])
    fig, axes = plt.subplots(1, 2, figsize=(10, 1.8 + 0.28 * len(names)), sharey=True, layout="constrained")
    for ax, side, title in ((axes[0], before, "before the method"), (axes[1], after, "after the revert")):
        by_name = {n["name"]: n for n in side}
        for y, name in enumerate(names):
            node = by_name.get(name)
            if node is None:
                ax.add_patch(Rectangle((0, y - 0.4), width, 0.8, color="#eeeeee"))
                continue
            _node_row(ax, node, y, colour, moved)
        ax.set_xlim(0, width)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xticks([i + 0.5 for i in range(width)], [str(i) for i in range(width)], fontsize=6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("card")
    axes[0].set_yticks(range(len(names)), [f"{n}{' *' if n in faulted else ''}" for n in names], fontsize=7)
    cordoned = {n["name"] for side in (before, after) for n in side if n["unschedulable"]}
    for text, name in zip(axes[0].get_yticklabels(), names, strict=True):
        if name in cordoned:
            text.set_color(WORST)
    handles = [Patch(color=colour[m], label=m) for m in models]
    handles += [Patch(color="#bbbbbb", label="other workloads"),
                Patch(facecolor="white", edgecolor="black", lw=2, label="moved replica"),
                Patch(facecolor="white", edgecolor="#999999", hatch="xx", label="card out of service")]
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=min(len(handles), 5))
    fig.suptitle("placement (* a faulted node; red: cordoned)", fontsize=10)
    return _svg(fig)


def _node_row(ax: Any, node: dict[str, Any], y: int, colour: dict[str, str], moved: set[Any]) -> None:
    x = 0
    for pod in node["pods"]:
        ax.add_patch(Rectangle((x, y - 0.4), pod["cards"], 0.8, facecolor=colour[pod["model"]],
                               edgecolor="black" if pod["name"] in moved else "white",
                               lw=2 if pod["name"] in moved else 0.5, alpha=1 if pod["ready"] else 0.45))
        x += pod["cards"]
    if node["other_cards"]:
        ax.add_patch(Rectangle((x, y - 0.4), node["other_cards"], 0.8, facecolor="#bbbbbb", edgecolor="white"))
        x += node["other_cards"]
    out = node["capacity"] - node["allocatable"]
    if out > 0:
        ax.add_patch(Rectangle((node["capacity"] - out, y - 0.4), out, 0.8, facecolor="white", edgecolor="#999999",
                               hatch="xx"))


def compare_slo(a: Run, b: Run) -> str | None:
    """The worst replica's series of each run's first SLO verdict, overlaid, from each one's fault."""
    if not a.series or not b.series:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    peak = 0.0
    for run, colour in ((a, "#1d3557"), (b, WORST)):
        s = run.series[0]
        worst = s.worst or next(iter(s.points[0][1]), None) if s.points else None
        xs = [t for t, values in s.points if worst in values]
        ys = [values[worst] for _, values in s.points if worst in values]
        peak = max([peak, *ys])
        ax.plot(xs, ys, color=colour, lw=2, label=f"{run.scenario} ({run.run_id}): {s.check}, worst {worst}")
        ax.axhline(s.threshold, color=colour, ls="--", lw=0.8)
        if s.recovered_after is not None:
            ax.axvline(s.recovered_after, color=colour, ls=":", lw=1.2)
    if peak > 20 * a.series[0].threshold:
        ax.set_yscale("log")
    ax.set_xlabel("seconds after the fault")
    ax.set_ylabel(a.series[0].indicator)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.25)
    return _svg(fig)


def trend(points: dict[str, list[tuple[float, float | None, bool]]]) -> str | None:
    """Per scenario, the recovery time of each run over time (a cross: the run did not pass)."""
    if not any(points.values()):
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, (scenario, runs) in enumerate(sorted(points.items())):
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        runs = sorted(runs)
        xs = list(range(len(runs)))
        ys = [r if r is not None else float("nan") for _, r, _ in runs]
        ax.plot(xs, ys, color=colour, lw=1.2, label=scenario)
        for x, (_, r, ok) in zip(xs, runs, strict=True):
            if r is not None:
                ax.plot([x], [r], marker="o" if ok else "X", color=colour if ok else WORST, ms=6 if ok else 9)
    longest = max(len(runs) for runs in points.values())
    ax.set_xlim(-0.5, longest - 0.5)
    ax.set_xticks(range(longest), [str(i + 1) for i in range(longest)])
    ax.set_xlabel("run of the scenario (oldest first)")
    ax.set_ylabel("recovery, s")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.25)
    return _svg(fig)


def timeline(run: Run) -> str | None:
    """The run's faults (applied -> reverted) and its checks (start -> end) on one time axis."""
    origin = run.started or run.first_fault
    if origin is None or not (run.faults or run.checks):
        return None
    rows: list[tuple[str, float, float, str]] = []
    for f in run.faults:
        if f.applied_at:
            end = f.ended_at or (origin + (run.duration or 0))
            rows.append((f"{f.kind} {f.target}", f.applied_at - origin, max(end - f.applied_at, 0.2), FAULT_SHADE))
    for c in run.checks:
        if c.start:
            rows.append((f"{c.phase}: {c.name}", c.start - origin, max(c.seconds, 0.2),
                         "#2d6a4f" if c.ok else WORST))
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.32 * len(rows)))
    for y, (_, start, span, colour) in enumerate(rows):
        ax.barh(y, span, left=start, height=0.55, color=colour)
    ax.set_yticks(range(len(rows)), [label for label, *_ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the run started")
    ax.grid(axis="x", alpha=0.25)
    ax.legend(handles=[Patch(color=FAULT_SHADE, label="fault in place"), Patch(color="#2d6a4f", label="check passed"),
                       Patch(color=WORST, label="check failed")], fontsize=7, loc="lower right")
    return _svg(fig)


def spares_curve(found: dict[str, Any]) -> str | None:
    """Per model, SLO-minutes lost a month against the replicas added (mean, 95 % CI), and the target."""
    points: dict[str, list[tuple[int, float, float, float]]] = {}
    for name, search in found.get("spares", {}).items():
        for c in search["curve"]:
            if "slo_minutes" in c:
                s = c["slo_minutes"]
                low, high = s["ci95"] if s["ci95"] else (s["mean"], s["mean"])
                points.setdefault(name, []).append((c["spares"], s["mean"], low, high))
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for i, (name, rows) in enumerate(sorted(points.items())):
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        xs = [r[0] for r in rows]
        ax.plot(xs, [r[1] for r in rows], marker="o", color=colour, lw=1.3, label=name)
        ax.fill_between(xs, [r[2] for r in rows], [r[3] for r in rows], color=colour, alpha=0.15, lw=0)
    ax.axhline(found["inputs"]["allowed_slo_minutes"], color=WORST, ls="--", lw=1, label="target")
    ax.set_xlabel("spare replicas added")
    ax.set_ylabel("SLO-minutes lost a month")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.25)
    return _svg(fig)
