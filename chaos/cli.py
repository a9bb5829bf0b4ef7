"""The `kilocard` command line.

Exit codes: 0 passed, 1 a fault could not be applied, 2 invalid input (nothing applied),
4 revert incomplete (operator action needed: `kilocard recover`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from chaos import inject, ledger
from chaos.errors import KilocardError, SpecError

EXIT_FAULT_FAILED, EXIT_INVALID, EXIT_REVERT_INCOMPLETE = 1, 2, 4


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line, `kilocard: <what>`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"kilocard: {message}\n")


def _cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, else the local testbed's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--ledger-dir", type=Path, default=ledger.default_dir(), help="default %(default)s")


def build_parser() -> Parser:
    parser = Parser(prog="kilocard", description="Chaos engineering for thousand-card LLM inference clusters.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    f = commands.add_parser("fault", help="apply faults, hold them, revert them (Ctrl-C/SIGTERM revert early)")
    source = f.add_mutually_exclusive_group(required=True)
    source.add_argument("-f", "--file", type=Path, help="YAML/JSON: one fault or a list of faults")
    source.add_argument("--spec", help="one fault as inline JSON")
    f.add_argument("--duration", type=float, default=None,
                   help="seconds to hold before reverting (default: the shortest ttl_seconds)")
    f.add_argument("--run-id", help="default: a new one")
    _cluster_flags(f)
    f.set_defaults(handler=cmd_fault)

    r = commands.add_parser("recover", help="revert every fault still open (from the ledger or in-cluster markers)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="one run id")
    which.add_argument("--all", action="store_true", help="every run")
    r.add_argument("--expired-only", action="store_true", help="only faults past their TTL (what a reaper does)")
    _cluster_flags(r)
    r.set_defaults(handler=cmd_recover)

    testbed = commands.add_parser("testbed", help="the local thousand-card testbed (build, up, down, status)")
    # The testbed is a separate package: loaded only for this command (the toolkit never needs it).
    from testbed import cli as testbed_cli

    testbed_cli.add_arguments(testbed)
    return parser


def _kubeconfig(args: argparse.Namespace) -> str | None:
    if args.kubeconfig or os.environ.get("KUBECONFIG") or Path("~/.kube/config").expanduser().is_file():
        return str(args.kubeconfig) if args.kubeconfig else None
    from testbed import cli as testbed_cli

    return testbed_cli.local_kubeconfig()


def _context(args: argparse.Namespace, run_id: str) -> Any:
    from chaos.agent.client import AgentClient
    from chaos.faults import Context
    from chaos.kube import Kube

    kube = Kube.from_kubeconfig(_kubeconfig(args), args.context)
    return Context(kube, AgentClient(kube), run_id, say=lambda m: print(m, flush=True))


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


def cmd_fault(args: argparse.Namespace) -> int:
    raws, source = _load_faults(args)
    where = [f"{source}[{i}]" if len(raws) > 1 else source for i in range(len(raws))]
    # All input is checked before anything happens.
    specs = [inject.parse(raw, w) for raw, w in zip(raws, where, strict=True)]
    run_id = ledger.check_run_id(args.run_id) if args.run_id else ledger.new_run_id()
    ctx = _context(args, run_id)
    book = ledger.Ledger(run_id, ctx.kube, args.ledger_dir)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    injections: list[inject.Injection] = []
    try:
        for raw, w in zip(raws, where, strict=True):
            injection = inject.inject(ctx, book, raw, w)
            injections.append(injection)
            for record in injection.records:
                print(f"{run_id} {record.kind} {json.dumps(record.target)}: {record.state}"
                      f"{' (' + record.error + ')' if record.error else ''}", flush=True)
            if stop.is_set():
                break
        hold = args.duration if args.duration is not None else min(
            [s.ttl_seconds for _, s in specs if s.ttl_seconds > 0], default=0.0)
        if not stop.is_set() and hold > 0:
            print(f"{run_id}: holding for {hold:g} s (Ctrl-C reverts now)", flush=True)
            stop.wait(hold)
    finally:
        left = inject.revert(ctx, book, [r for i in injections for r in i.records])
        ctx.kube.close()
    for record in left:
        print(f"kilocard: revert incomplete: {record.kind} {json.dumps(record.target)}: {record.error}; "
              f"run 'kilocard recover --run {run_id}'", file=sys.stderr)
    if left:
        return EXIT_REVERT_INCOMPLETE
    print(f"{run_id}: reverted", flush=True)
    return EXIT_FAULT_FAILED if any(i.failed for i in injections) else 0


def cmd_recover(args: argparse.Namespace) -> int:
    run_id = ledger.check_run_id(args.run) if args.run else None
    ctx = _context(args, run_id or "recover")
    try:
        reverted, left = inject.recover(ctx, args.ledger_dir, run_id, args.expired_only)
    finally:
        ctx.kube.close()
    for r in reverted:
        print(f"reverted {r.run_id} {r.kind} {json.dumps(r.target)}")
    for r in left:
        print(f"kilocard: still open: {r.run_id} {r.kind} {json.dumps(r.target)}: {r.error}", file=sys.stderr)
    if not reverted and not left:
        print("nothing to recover")
    return EXIT_REVERT_INCOMPLETE if left else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except SpecError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KilocardError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kilocard: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
