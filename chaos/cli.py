"""The `kilocard` command line. Exit codes (chaos.errors.Exit): 0 passed, 1 a fault could not be
applied, 2 invalid input (nothing applied), 3 aborted, 4 revert incomplete (operator action
needed: `kilocard recover`).

Only `kilocard testbed ...` loads the testbed package; every other command is the toolkit alone,
so the in-cluster reaper and a runner Job carry nothing of the local testbed.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from chaos import ledger
from chaos.errors import Exit, KilocardError, SpecError, exit_code


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line, `kilocard: <what>`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.INVALID, f"kilocard: {message}\n")


def _cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--ledger-dir", type=Path, default=ledger.default_dir(), help="default %(default)s")
    p.add_argument("--card-resource", default="nvidia.com/gpu",
                   help="extended resource of a card (huawei.com/Ascend910, amd.com/gpu); default %(default)s")


def _fault_source(p: argparse.ArgumentParser, experiments: bool = False) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("-f", "--file", type=Path, help="YAML/JSON: one fault or a list of faults")
    source.add_argument("--spec", help="one fault as inline JSON")
    if experiments:
        source.add_argument("-e", "--experiment", type=Path,
                            help="a Chaos Toolkit experiment: its faults, blast radius and guards")


def build_parser(with_testbed: bool = False) -> Parser:
    parser = Parser(prog="kilocard", description="Chaos engineering for thousand-card LLM inference clusters.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    f = commands.add_parser("fault", help="apply faults, hold them, revert them (Ctrl-C/SIGTERM revert early)")
    _fault_source(f)
    f.add_argument("--duration", type=float, default=None,
                   help="seconds to hold before reverting (default: the shortest ttl_seconds)")
    f.add_argument("--run-id", help="default: a new one")
    _cluster_flags(f)
    f.set_defaults(handler=cmd_fault)

    p = commands.add_parser("plan", help="resolve and check faults (or an experiment) against the cluster; "
                                          "change nothing")
    _fault_source(p, experiments=True)
    p.add_argument("--var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
                   help="with --experiment: configuration value, as chaos run --var")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--twin", action="store_true",
                   help="with --experiment: copy the cluster's nodes and the targeted workloads into a fresh local "
                        "testbed and run the experiment there (the real cluster is only read)")
    p.add_argument("--twin-port-base", type=int, default=36443, help="the twin testbed's apiserver port")
    p.add_argument("--twin-timing", choices=("fast", "default", "production"), default="default",
                   help="how fast the twin's replicas start (the local testbed's --timing)")
    p.add_argument("--journal", type=Path, help="with --twin: where the rehearsal's journal goes")
    _cluster_flags(p)
    p.set_defaults(handler=cmd_plan)

    r = commands.add_parser("recover", help="revert every fault still open (from the ledger or in-cluster markers)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="one run id")
    which.add_argument("--all", action="store_true", help="every run")
    r.add_argument("--expired-only", action="store_true", help="only faults past their TTL (what a reaper does)")
    _cluster_flags(r)
    r.set_defaults(handler=cmd_recover)

    run = commands.add_parser("run", help="run Chaos Toolkit experiments strictly (exit 0 passed, 1 failed, "
                                          "2 invalid, 3 aborted, 4 revert incomplete)")
    _experiment_flags(run)
    run.add_argument("--journal", type=Path, default=None,
                     help="journal file for one experiment, or folder for several (default: journal-<run id>.json)")
    run.add_argument("--prometheus-url", help="Prometheus of the SLO probes (configuration kilocard_prometheus_url)")
    run.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    run.add_argument("--context", help="kubeconfig context")
    run.add_argument("--ledger-dir", type=Path, default=ledger.default_dir(), help="default %(default)s")
    run.set_defaults(handler=cmd_run)

    v = commands.add_parser("validate", help="check experiments without a cluster: every error at once, exit 2")
    _experiment_flags(v)
    v.set_defaults(handler=cmd_validate)

    testbed = commands.add_parser("testbed", help="the local thousand-card testbed (build, up, down, status)")
    if with_testbed:  # a separate package, loaded for this command only
        from testbed import cli as testbed_cli

        testbed_cli.add_arguments(testbed)
    return parser


def _experiment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiments", nargs="+", type=Path, metavar="EXPERIMENT",
                   help="Chaos Toolkit experiment files (YAML or JSON), or folders of them")
    p.add_argument("--var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
                   help="configuration value, as chaos run --var (type str, int, float or bytes)")
    p.add_argument("--var-file", action="append", default=[], help="configuration/secrets file, as chaos run")


def _experiment_files(paths: list[Path]) -> list[Path]:
    """Files as given; folders give their *.yaml, *.yml and *.json files, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        else:
            found.append(path)
    return found


def cmd_validate(args: argparse.Namespace) -> int:
    from chaos import run

    worst = Exit.PASSED
    for path in _experiment_files(args.experiments):
        try:
            experiment = run.load(path, args.var, args.var_file)
        except SpecError as exc:
            print(exc, file=sys.stderr)
            worst = Exit.INVALID
        else:
            print(f"{path}: valid ({len(experiment.faults)} kilocard fault(s))")
    return worst


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from chaos import actions, run, timeline

    _embedded_default(args)
    variables = list(args.var)
    for key, value in (("kilocard_kubeconfig", args.kubeconfig), ("kilocard_context", args.context),
                       ("kilocard_prometheus_url", args.prometheus_url), ("kilocard_ledger_dir", args.ledger_dir)):
        if value is not None:
            variables.append(f"{key}={value}")
    files = _experiment_files(args.experiments)
    console = Console(highlight=False)
    results = []
    for path in files:
        console.rule(str(path))
        result = run.run_file(path, variables, args.var_file, actions.session, view=timeline.Timeline(console))
        results.append(result)
        journal = _journal_path(args.journal, result, several=len(files) > 1)
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(result.journal, indent=2, default=str))
        console.print(timeline.summary(result))
        console.print(f"journal {journal}")
    if len(results) > 1:
        _verdict_table(results, console)
    return max((r.exit for r in results), default=Exit.PASSED)


def _embedded_default(args: argparse.Namespace) -> None:
    """No cluster named and no local testbed running: start the local testbed with the default
    fleet (the embedded default), and use it."""
    from chaos.kube import cluster_named
    from chaos.vocabulary import local_testbed_kubeconfig

    if cluster_named(args.kubeconfig) or local_testbed_kubeconfig() is not None:
        return
    from chaos import timeline
    from testbed import cli as testbed_cli

    with timeline.progress("no cluster named: starting the local testbed with the default fleet") as update:
        args.kubeconfig = str(testbed_cli.embedded_default(say=update))


def _verdict_table(results: list[Any], console: Any) -> None:
    from rich.table import Table

    from chaos.timeline import COLOUR

    table = Table("experiment", "verdict", "expected", "exit", "reason", title="kilocard run")
    for r in results:
        k = r.journal.get("kilocard") or {}
        verdict = k.get("verdict", r.exit.name.lower())
        expected = k.get("expected")
        table.add_row(r.path.name, f"[{COLOUR[r.exit]}]{verdict}[/]",
                      "-" if not expected else Exit(expected["exit"]).name.lower(), str(int(r.exit)),
                      r.reason.splitlines()[0].removeprefix(f"{r.path}: "))
    console.print(table)


def _journal_path(given: Path | None, result: Any, several: bool) -> Path:
    name = f"journal-{result.path.stem}-{result.run_id or 'invalid'}.json"
    if given is None:
        return Path(name)
    return given / name if several or given.is_dir() else given


def _context(args: argparse.Namespace, run_id: str) -> Any:
    from chaos.agent.client import AgentClient
    from chaos.faults import Context
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig

    kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    return Context(kube, AgentClient(kube), run_id, say=lambda m: print(m, flush=True),
                   card_resource=args.card_resource)


def _load_faults(args: argparse.Namespace) -> tuple[list[Any], str]:
    if args.spec is not None:
        try:
            return [json.loads(args.spec)], "--spec"
        except ValueError as exc:
            raise SpecError(f"--spec: not valid JSON: {exc}") from None
    try:
        data = yaml.safe_load(args.file.read_text())
    except OSError as exc:
        raise SpecError(f"{args.file}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{args.file}: not valid YAML: {exc}") from None
    return (data if isinstance(data, list) else [data]), str(args.file)


def _planned(args: argparse.Namespace, run_id: str, duration: float | None = None) -> tuple[Any, Any]:
    """(context, plan): every entry parsed first (no cluster), then resolved and checked. With a
    `duration`, a hold the shortest TTL would cut short is refused before connecting too."""
    from chaos import plan

    raws, source = _load_faults(args)
    parsed = plan.parse_all(plan.entries(raws, source))  # bad input is found before connecting anywhere
    shortest = _shortest_ttl((module, spec) for _, module, spec in parsed)
    if duration is not None and shortest is not None and duration > shortest:
        raise SpecError(f"--duration: {duration:g} s is longer than the shortest ttl_seconds ({shortest:g} s): "
                        "that fault would expire, and be reverted by its TTL, in the middle of the hold")
    ctx = _context(args, run_id)
    try:
        return ctx, plan.resolve(ctx, parsed)
    except BaseException:
        ctx.kube.close()
        raise


def _shortest_ttl(faults: Iterable[tuple[Any, Any]]) -> float | None:
    """The shortest TTL of the revertible faults among (kind module, spec) pairs; None: none."""
    return min((spec.ttl_seconds for module, spec in faults if module.REVERTIBLE), default=None)


def cmd_plan(args: argparse.Namespace) -> int:
    _embedded_default(args)
    if args.experiment is not None:
        return _plan_experiment(args)
    ctx, planned = _planned(args, "plan")
    ctx.kube.close()
    if args.json:
        print(json.dumps(planned.describe(), indent=2))
        return 0
    for fault in planned.describe():
        print(f"{fault['where']}: {fault['kind']} on {len(fault['targets'])} target(s), ttl {fault['ttl_seconds']:g} s")
        for target in fault["targets"]:
            print(f"  {json.dumps(target)}")
    return 0


def _plan_experiment(args: argparse.Namespace) -> int:
    from chaos import actions, run

    experiment = run.load(args.experiment, args.var)
    configuration = {**(experiment.data.get("configuration") or {}), "kilocard_ledger_dir": str(args.ledger_dir),
                     "kilocard_card_resource": args.card_resource}
    configuration.update({k: v for k, v in (("kilocard_kubeconfig", args.kubeconfig),
                                            ("kilocard_context", args.context)) if v is not None})
    ctx, _book = actions.session({**configuration, "kilocard_run_id": ledger.new_run_id()})
    try:
        found = run.check(ctx, experiment)
    finally:
        ctx.kube.close()
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for fault in found["faults"]:
        print(f"{fault['where']}: {fault['kind']} on {len(fault['targets'])} target(s), ttl {fault['ttl_seconds']:g} s")
        for target in fault["targets"]:
            print(f"  {json.dumps(target)}")
    radius = found["blast_radius"]
    print(f"blast radius: {radius['pods']} pods, {len(radius['nodes'])} nodes, {radius['cards']} cards; "
          f"within the guards ({experiment.limits})")
    for model, (now, after) in radius["ready_replicas"].items():
        print(f"  {model}: {now} Ready replicas now, {after} once the faults land")
    for model, reason in radius["room"].items():
        print(f"  room for {model}: {reason}")
    return _rehearse_on_twin(args, experiment, radius["models"]) if args.twin else 0


def _rehearse_on_twin(args: argparse.Namespace, experiment: Any, models: list[str]) -> int:
    """plan --twin: the experiment on a copy of the cluster; its verdict, and where the real
    scheduler put the replicas it drove off. The real cluster is only read."""
    from rich.console import Console
    from rich.table import Table

    from chaos import actions, run, timeline
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig
    from testbed import cli as testbed_cli

    console = Console(highlight=False)
    real = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    try:
        with timeline.progress("twin: copying the nodes and the targeted workloads into a fresh testbed") as say:
            twin = testbed_cli.twin_up(real, sorted({m.split("/", 1)[0] for m in models}), args.card_resource,
                                       args.twin_port_base, args.twin_timing, say)
    finally:
        real.close()
    try:
        on_twin = {"kilocard_kubeconfig": str(twin.paths.kubeconfig), "kilocard_prometheus_url": twin.prometheus_url,
                   "kilocard_ledger_dir": str(twin.paths.root / "ledger")}
        for configuration in (experiment.data.setdefault("configuration", {}), experiment.config_vars):
            configuration.pop("kilocard_context", None)
            configuration.update(on_twin)
        result = run.execute(experiment, actions.session, view=timeline.Timeline(console))
    finally:
        testbed_cli.twin_down(twin)
    console.print(timeline.summary(result))
    moved = Table("replica", "replaced by", "on node", "Ready after (s)", title="where the twin's scheduler put them")
    for r in result.journal["kilocard"]["recovery"]:
        moved.add_row(r["pod"], r.get("replacement", "-"), r.get("node", "-"),
                      f"{r['ready']:.1f}" if "ready" in r else "not Ready")
    if moved.rows:
        console.print(moved)
    if args.journal:
        args.journal.write_text(json.dumps(result.journal, indent=2, default=str))
        console.print(f"twin journal {args.journal}")
    return int(result.exit)


def cmd_fault(args: argparse.Namespace) -> int:
    from chaos import lifecycle

    run_id = ledger.check_run_id(args.run_id) if args.run_id else ledger.new_run_id()
    ctx, planned = _planned(args, run_id, args.duration)
    book = ledger.Ledger(run_id, ctx.kube, args.ledger_dir)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: ctx.stop.set())
    hold = args.duration if args.duration is not None else (
        _shortest_ttl((f.module, f.spec) for f in planned.faults) or 0.0)
    try:
        outcome = lifecycle.run(ctx, book, planned, hold)
    finally:
        ctx.kube.close()
    if outcome.error is not None:
        print(f"kilocard: {outcome.error}", file=sys.stderr)
    for fault in outcome.skipped:
        print(f"kilocard: stopped before applying {fault.where} ({fault.kind})", file=sys.stderr)
    for record in outcome.left:
        print(f"kilocard: revert incomplete: {record.kind} {json.dumps(record.target)}: {record.error}; "
              f"run 'kilocard recover --run {run_id}'", file=sys.stderr)
    if outcome.left:
        return Exit.REVERT_INCOMPLETE
    print(f"{run_id}: reverted", flush=True)
    if outcome.error is not None:
        return exit_code(outcome.error)
    if outcome.skipped:
        return Exit.ABORTED
    return Exit.FAILED if outcome.failed else Exit.PASSED


def cmd_recover(args: argparse.Namespace) -> int:
    from chaos import revert

    run_id = ledger.check_run_id(args.run) if args.run else None
    ctx = _context(args, run_id or "recover")
    try:
        reverted, left = revert.recover(ctx, args.ledger_dir, run_id, args.expired_only)
    finally:
        ctx.kube.close()
    for r in reverted:
        print(f"reverted {r.run_id} {r.kind} {json.dumps(r.target)}")
    for r in left:
        print(f"kilocard: still open: {r.run_id} {r.kind} {json.dumps(r.target)}: {r.error}", file=sys.stderr)
    if not reverted and not left:
        print("nothing to recover")
    return Exit.REVERT_INCOMPLETE if left else Exit.PASSED


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(with_testbed=bool(argv) and argv[0] == "testbed").parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KilocardError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        print("kilocard: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
