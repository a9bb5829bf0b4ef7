"""The `kilocard` command line. Exit codes (chaos.errors.Exit): 0 passed, 1 a fault could not be
applied, 2 invalid input (nothing applied), 3 aborted, 4 revert incomplete (operator action
needed: `kilocard recover`).

Only `kilocard testbed ...` loads the testbed package; every other command is the toolkit alone,
so the in-cluster reaper and a runner Job carry nothing of the local testbed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import yaml

from chaos import __version__, failpoints, input_file, ledger
from chaos import load as traffic
from chaos.errors import Exit, KilocardError, SpecError, exit_code
from chaos.output import emit, output_flag
from chaos.settings import Settings, key
from chaos.vocabulary import CATALOG, DEFAULT_PORT_BASE, EXPERIMENT_SUFFIXES, clipped, describe_target, natural_key


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as its usage line and `kilocard: <what>`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(Exit.INVALID, f"kilocard: {message}\n")


def _ledger_dir(given: str) -> Path:
    """argparse converts a string default only for the command parsed: $KILOCARD_LEDGER or ~ are
    looked up (and an unusable one said) by the commands that keep a ledger, never by validate."""
    return Path(given) if given else ledger.default_dir()


def _positive_float(given: str) -> float:
    try:
        value = float(given)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {given!r}")
    return value


def _positive_int(given: str) -> int:
    if not given.isdigit() or int(given) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1, got {given!r}")
    return int(given)


def _availability(given: str) -> float:
    value = _positive_float(given)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a share below 1 (0.999), got {given!r}")
    return value


def _fleet_flags(p: argparse.ArgumentParser) -> None:
    """What hunt and rehearse read the fleet with: the cluster, and its loads from Prometheus."""
    p.add_argument("-n", "--namespace", help="the models of one namespace (default: every namespace's); the "
                                             "nodes and the room are the whole cluster's")
    p.add_argument("--slo-ttft", type=_positive_float, default=0.5, metavar="SECONDS",
                   help="the P95 TTFT every model must keep (default 0.5, the chat SLO)")
    p.add_argument("--peak", type=_positive_float, default=1.0, metavar="FACTOR",
                   help="plan for this multiple of the load of the last --window (default 1)")
    p.add_argument("--window", default="5m", help="the trailing window the load and service rates are read over")
    p.add_argument("--prometheus-url", default=os.environ.get("KILOCARD_PROMETHEUS_URL"),
                   help="the Prometheus the loads are read from (else $KILOCARD_PROMETHEUS_URL, else the local "
                        "testbed's when it is the cluster); none: the SLO is not predicted")
    output_flag(p)
    p.add_argument("--page", type=Path, metavar="FOLDER",
                   help="also write the page (an HTML file) and its JSON into FOLDER")
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--card-resource", help="extended resource of a card; default: the one the nodes' capacity offers")
    _testbed_flag(p)


def _cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--ledger-dir", type=_ledger_dir, default="",
                   help="where the run's ledger is kept ($KILOCARD_LEDGER, else ~/.local/state/kilocard/ledger)")
    p.add_argument("--card-resource",
                   help="extended resource of a card (huawei.com/Ascend910, amd.com/gpu); default: the one the "
                        "nodes' capacity offers")


def _fault_source(p: argparse.ArgumentParser, experiments: bool = False) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("-f", "--file", type=Path, help="YAML/JSON: one fault or a list of faults")
    source.add_argument("--spec", help="one fault as inline JSON")
    p.add_argument("-n", "--namespace", help="with -f/--spec: the namespace of each fault that names none and "
                                             "takes one (pod-kill, rank-stall, network-policy-partition, ...)")
    if experiments:
        source.add_argument("-e", "--experiment", type=Path,
                            help="a Chaos Toolkit experiment: its faults, blast radius and guards")


def build_parser(with_testbed: bool = False) -> Parser:
    parser = Parser(prog="kilocard", description="Chaos engineering for thousand-card LLM inference clusters.")
    parser.add_argument("--version", action="version", version=f"kilocard {__version__}")
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
    output_flag(p)
    p.add_argument("--twin", action="store_true",
                   help="with --experiment: copy the cluster's nodes and the targeted workloads into a fresh local "
                        "testbed and run the experiment there (the real cluster is only read)")
    p.add_argument("--twin-port-base", type=int, default=36443, help="the twin testbed's apiserver port")
    p.add_argument("--twin-timing", choices=("fast", "default", "production"), default="default",
                   help="how fast the twin's replicas start (the local testbed's --timing)")
    p.add_argument("--journal", type=Path, help="with --twin: where the rehearsal's journal goes")
    p.add_argument("--prometheus-url", default=os.environ.get("KILOCARD_PROMETHEUS_URL"),
                   help="with --experiment and a load: the Prometheus whose latency figures size the load against "
                        "the KV cache the faults leave (default: the experiment's, else the local testbed's)")
    _cluster_flags(p)
    _testbed_flag(p)
    p.set_defaults(handler=cmd_plan)

    r = commands.add_parser("recover", help="revert every fault still open (from the ledger or in-cluster markers)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="one run id")
    which.add_argument("--all", action="store_true", help="every run")
    r.add_argument("--expired-only", action="store_true", help="only faults past their TTL (what a reaper does)")
    r.add_argument("--dry-run", action="store_true", help="say what would be reverted; revert nothing")
    output_flag(r)
    _cluster_flags(r)
    r.set_defaults(handler=cmd_recover)

    d = commands.add_parser("discover", help="the models kilocard finds on the cluster, as the serving stacks "
                                             "made them: replicas, ranks, TP and PP sizes, engine, and where each "
                                             "was read (a label, an argument, the owner); changes nothing")
    scope = d.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="one namespace (default: every namespace)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default)")
    output_flag(d)
    d.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    d.add_argument("--context", help="kubeconfig context")
    d.set_defaults(handler=cmd_discover)

    h = commands.add_parser("hunt", help="the fleet's weakest points: each single card, TP group, node, rack, "
                                         "switch and zone lost in turn on one snapshot, what that does to every "
                                         "model predicted (replicas lost, room to place them again, KV cache, "
                                         "P95 TTFT) and ranked worst first; changes nothing")
    h.add_argument("--top", type=_positive_int, default=10, help="how many of the worst domains to print (text)")
    h.add_argument("--kinds", help="the kinds of domain to lose, comma-separated (default: every kind: card, "
                                   "tp-group, node, rack, switch, zone)")
    h.add_argument("--confirm", type=int, default=0, metavar="N",
                   help="confirm the N weakest on a twin of the cluster (a fresh local testbed for each): the "
                        "real fault, the catalog's probes, predicted against observed (default 0)")
    h.add_argument("--confirm-budget", type=_positive_float, default=120.0, metavar="SECONDS",
                   help="how long each confirmation watches the models come back (on the twin's timing)")
    h.add_argument("--twin-port-base", type=int, default=36443, help="the twins' apiserver port")
    h.add_argument("--twin-timing", choices=("fast", "default", "production"), default="default",
                   help="how fast the twins' replicas start (the local testbed's --timing)")
    h.add_argument("--topology-label", action="append", default=[], metavar="KEY=KIND",
                   help="a node label whose values name failure domains, and their kind (rack, switch, zone); "
                        "added to kilocard's rack, the zone and topograph's leaf and spine switches")
    _fleet_flags(h)
    h.set_defaults(handler=cmd_hunt)

    rh = commands.add_parser("rehearse", help="a month of failures before it happens: field failure rates and "
                                              "measured recoveries drawn over the fleet one snapshot shows, many "
                                              "months over; per model the SLO-minutes lost, availability, worst "
                                              "day and time with no spare, and the spares that meet a target; "
                                              "changes nothing")
    rh.add_argument("--horizon", default="30d", help="how long a month is (Prometheus duration: 30d, 720h)")
    rh.add_argument("--seeds", type=_positive_int, default=20, help="how many months are simulated (seeds 0..N-1)")
    rh.add_argument("--recoveries", type=Path,
                    help="measured recovery samples (JSON: detection seconds per class of failure, start-up "
                         "seconds per model; bench/recovery_phases.py writes them); default: the testbed's, "
                         "measured on production timing")
    rh.add_argument("--startup", action="append", default=[], metavar="MODEL=SECONDS",
                    help="a model's start-up, where none was measured")
    rh.add_argument("--rate", action="append", default=[], metavar="CLASS.FIELD=VALUE",
                    help="change a class of failure: gpu, host, network, engine; per_day (per card or node), "
                         "repair_hours, effect (node, card, replica)")
    rh.add_argument("--crews", type=_positive_int, help="repairs done at a time (default: every failed part at once)")
    rh.add_argument("--target", type=_availability, default=0.999,
                    help="the SLO availability each model must keep in 9 months of 10 (default 0.999)")
    rh.add_argument("--max-spares", type=_positive_int, default=8, help="the most spare replicas tried per model")
    rh.add_argument("--no-spares", action="store_true", help="skip the search over spares")
    rh.add_argument("--worst-hour", type=Path, metavar="FILE",
                    help="write the worst hour as an incident timeline for `kilocard replay` (its failures as "
                         "faults, its SLO breaches as the symptoms), every time divided by --compress")
    rh.add_argument("--compress", type=_positive_float, default=10.0,
                    help="how much faster than production the replay runs (the testbed's default timing: 10)")
    _fleet_flags(rh)
    rh.set_defaults(handler=cmd_rehearse)

    run = commands.add_parser("run", help="run Chaos Toolkit experiments strictly (exit 0 passed, 1 failed, "
                                          "2 invalid, 3 aborted, 4 revert incomplete)")
    _experiment_flags(run)
    _run_flags(run)
    run.add_argument("--settle-timeout", type=float, default=300.0, metavar="SECONDS",
                     help="between experiments, wait up to this long for the models the last one touched to be "
                          "whole again (every TP group Ready, as many pods as asked for); 0: do not wait "
                          "(default %(default)g)")
    run.set_defaults(handler=cmd_run)

    replay = commands.add_parser("replay", help="replay an incident's timeline of faults at their offsets and judge "
                                                "its symptoms: reproduced (exit 0) or not (exit 1); with --expect "
                                                "fixed, that they do not come back")
    replay.add_argument("timeline", type=Path, metavar="TIMELINE", help="a timeline file (kilocard record writes one)")
    replay.add_argument("--expect", choices=("reproduced", "fixed"), default="reproduced",
                        help="reproduced (default): every recorded symptom comes back within its tolerance; fixed: "
                             "none does, or each within its budget in the timeline's `fixed` block")
    _var_flags(replay)
    _run_flags(replay)
    replay.add_argument("--card-resource", help="with --twin: the card's extended resource (default: the nodes')")
    replay.add_argument("--twin", action="store_true", help="replay it on a twin of the cluster (as plan --twin)")
    replay.add_argument("--twin-port-base", type=int, default=36443, help="the twin testbed's apiserver port")
    replay.add_argument("--twin-timing", choices=("fast", "default", "production"), default="default",
                        help="how fast the twin's replicas start")
    replay.set_defaults(handler=cmd_replay)

    day = commands.add_parser("gameday", help="game days: experiments in order, with pauses, approval gates and a "
                                              "time window; run here, or scheduled as a Kubernetes CronJob")
    days = day.add_subparsers(dest="gameday_command", required=True, parser_class=Parser)
    dr = days.add_parser("run", help="run a game-day plan here, step by step (exit 0 all passed, 1 an experiment "
                                     "failed, 2 invalid plan, 3 aborted, 4 revert incomplete)")
    dr.add_argument("plan", type=Path, metavar="PLAN", help="a game-day plan (YAML)")
    _var_flags(dr)
    _run_flags(dr)
    dr.add_argument("--summary-configmap", metavar="NAME",
                    help="also keep the game day's journal in this ConfigMap (key gameday.json), in the "
                         "ServiceAccount's namespace in-cluster, else kilocard-system")
    dr.set_defaults(handler=cmd_gameday_run)
    ds = days.add_parser("schedule", help="print the Kubernetes manifests of a CronJob that runs the plan: its "
                                          "ConfigMap, ServiceAccount, least-privilege RBAC and report storage")
    ds.add_argument("plan", type=Path, metavar="PLAN")
    ds.add_argument("--cron", required=True, help="when: a 5-field cron expression or @hourly/@daily/@weekly/...")
    ds.add_argument("--namespace", default="kilocard-system", help="default %(default)s")
    ds.add_argument("--name", help="the CronJob's name (default: from the plan file)")
    ds.add_argument("--image", default="ghcr.io/kilocard/kilocard:0.1.0", help="default %(default)s")
    ds.add_argument("--storage", choices=("pvc", "configmap"), default="pvc",
                    help="reports on a PVC, or only the summary in a ConfigMap (default %(default)s)")
    ds.add_argument("--storage-size", default="1Gi", help="with --storage pvc (default %(default)s)")
    ds.add_argument("--storage-class", help="with --storage pvc (default: the cluster's)")
    ds.add_argument("--starting-deadline", type=int, default=300, help="seconds (default %(default)s)")
    ds.add_argument("--prometheus-url", default=os.environ.get("KILOCARD_PROMETHEUS_URL"),
                    help="the cluster's Prometheus, for the SLO probes (else $KILOCARD_PROMETHEUS_URL)")
    ds.add_argument("--var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
                    help="configuration value for every experiment")
    ds.set_defaults(handler=cmd_gameday_schedule)

    rec = commands.add_parser("record", help="record an incident's timeline and its symptoms from firing alerts "
                                             "(Prometheus ALERTS), Kubernetes Events and the audit log, for kilocard "
                                             "replay")
    rec.add_argument("--since", help="start of the incident's range: RFC 3339, or epoch seconds (required without "
                                     "--journal)")
    rec.add_argument("--until", help="end of the range: RFC 3339, or epoch seconds (required without --journal)")
    rec.add_argument("--journal", type=Path, help="a kilocard run's journal (or a game day's, with "
                                                  "--gameday-step): its faults as applied and reverted, its "
                                                  "recovery; alerts from --prometheus-url over its range")
    rec.add_argument("--gameday-step", help="with a game day's journal: the step (its id, e.g. step-5, or its "
                                            "number)")
    rec.add_argument("-n", "--namespace", action="append", default=[],
                     help="namespaces whose pod events are the recovery")
    rec.add_argument("--prometheus-url", default=os.environ.get("KILOCARD_PROMETHEUS_URL"),
                     help="where the ALERTS series are (else $KILOCARD_PROMETHEUS_URL; neither: no alerts read)")
    _prometheus_token_flag(rec)
    rec.add_argument("--slo", action="append", default=[], metavar="INDICATOR=THRESHOLD",
                     help="record each model's breach of this SLO (ttft_p95, itl_p95 or error_ratio over the "
                          "threshold on its worst replica) as a symptom, for every model the -n namespaces serve; "
                          "repeatable, e.g. --slo ttft_p95=0.5")
    rec.add_argument("--slo-window", default="30s", help="the indicators' rate window (default %(default)s)")
    rec.add_argument("--step", type=float, default=1.0, help="range query step, seconds (default %(default)s)")
    rec.add_argument("--mapping", type=Path, help="YAML: sections alerts, events, conditions (a node condition's "
                                                 "type) and device_taints (a taint's key): name -> {lead, fault "
                                                 "template}, added to (or replacing) the built-in mapping")
    rec.add_argument("--audit-log", type=Path, action="append", default=[],
                     help="the apiserver's audit log (JSON lines), where readable: pods deleted or evicted from "
                          "outside become pod-kill faults")
    rec.add_argument("--tolerance", type=float, default=15.0,
                     help="seconds either side of each recorded symptom a replay accepts (default %(default)s)")
    rec.add_argument("--title", help="the timeline's title (default: a journal's experiment and run id, else "
                                     "'recorded incident')")
    rec.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    rec.add_argument("--context", help="kubeconfig context")
    rec.add_argument("-o", "--output", type=Path, required=True, help="the timeline file to write")
    rec.set_defaults(handler=cmd_record)

    rep = commands.add_parser("report", help="reports from journals: HTML, Markdown and JUnit per run; a trend page "
                                             "of several; two runs side by side")
    rep.add_argument("journals", nargs="+", type=Path, metavar="JOURNAL",
                     help="journal files of kilocard run, or folders of them (their *.json and */journal.json)")
    rep.add_argument("--out", type=Path, default=Path("reports"), help="default %(default)s")
    rep.add_argument("--compare", action="store_true", help="two journals: side by side, SLO series overlaid")
    rep.set_defaults(handler=cmd_report)

    ld = commands.add_parser("load", help="drive an OpenAI-compatible endpoint at a rate (open loop) and measure "
                                          "TTFT, TPOT and errors from the client (exit 0; 1 when no request was "
                                          "answered)")
    ld.add_argument("--url", help="the API's root, without /v1 (default: the local testbed's simulator, port base + 6: "
                                     f"http://127.0.0.1:{DEFAULT_PORT_BASE + 6} on the default ports)")
    ld.add_argument("--model", required=True, help="the model's served name")
    ld.add_argument("--qps", type=float, required=True, help="requests per second offered (Poisson arrivals)")
    ld.add_argument("--prompt-tokens", type=int, required=True, help="about this many prompt tokens a request")
    ld.add_argument("--output-tokens", type=int, required=True, help="max_tokens of each request")
    ld.add_argument("--duration", dest="duration_seconds", metavar="SECONDS", type=float, required=True,
                    help="how long the load is offered")
    ld.add_argument("--api", choices=tuple(traffic.APIS), default="completions", help="default %(default)s")
    ld.add_argument("--prefix-share", type=float, help="of each prompt, one prefix every request shares (0 to 0.99; "
                                                        "default 0)")
    ld.add_argument("--burst-factor", type=float, help="the rate's multiple during a burst")
    ld.add_argument("--burst", dest="burst_seconds", metavar="SECONDS", type=float, help="how long each burst lasts")
    ld.add_argument("--burst-every", dest="burst_every_seconds", metavar="SECONDS", type=float,
                    help="a burst starts with the load and then every this often (default 60)")
    ld.add_argument("--seed", type=int, default=0, help="of the arrivals and prompts (default %(default)s)")
    ld.add_argument("--max-in-flight", type=int, default=traffic.DEFAULT_MAX_IN_FLIGHT,
                    help="requests open at once; one more counts as an error, client_saturated (default %(default)s)")
    ld.add_argument("--timeout", dest="timeout_seconds", metavar="SECONDS", type=float,
                    default=traffic.DEFAULT_TIMEOUT_SECONDS, help="a request may take in all (default %(default)s)")
    token = ld.add_mutually_exclusive_group()
    token.add_argument("--token-env", metavar="NAME", help="environment variable holding a bearer token")
    token.add_argument("--token-file", metavar="PATH", help="file holding a bearer token")
    ld.add_argument("--journal", type=Path, help="write the load's record there (kilocard.load: summary, series)")
    output_flag(ld, "json, yaml: the summary, machine-readable")
    ld.set_defaults(handler=cmd_load)

    comp = commands.add_parser("completion", help="print the shell's completion for kilocard: "
                                                  "eval \"$(kilocard completion bash)\"")
    comp.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    comp.set_defaults(handler=cmd_completion)

    v = commands.add_parser("validate", help="check experiments, fault files, game-day plans and incident timelines "
                                             "without a cluster: every error at once, exit 2")
    _experiment_flags(v)
    output_flag(v, "json, yaml: one entry per file (file, valid, what, problems) on stdout, for CI annotations")
    v.set_defaults(handler=cmd_validate)

    cat = commands.add_parser("catalog", help="the shipped catalog: its experiments (S1-S12, S14), game-day plans and "
                                              "incident timelines, with the folder they are in")
    cat.add_argument("--path", action="store_true", help="print the folder only: kilocard validate \"$(kilocard "
                                                         "catalog --path)\"")
    cat.set_defaults(handler=cmd_catalog)

    sch = commands.add_parser("schema", help="print the JSON Schema (draft 2020-12) of kilocard's parts of an "
                                             "experiment, for an editor's completion and checks")
    sch.set_defaults(handler=cmd_schema)

    testbed = commands.add_parser("testbed", help="the local thousand-card testbed (build, up, down, status)")
    if with_testbed:  # a separate package, loaded for this command only
        from testbed import cli as testbed_cli

        testbed_cli.add_arguments(testbed)
    return parser


def _run_flags(p: argparse.ArgumentParser) -> None:
    """What a command that runs experiments takes besides them (run, replay, gameday run)."""
    noise = p.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="no live view: one line per experiment (its verdict and reason) and the files written")
    noise.add_argument("-v", "--verbose", action="count", default=0,
                       help="Chaos Toolkit's own log on stderr as well (-vv: its debug log)")
    p.add_argument("--journal", type=Path, default=None,
                   help="journal file for one experiment, or folder for several (default: journal-<run id>.json)")
    p.add_argument("--prometheus-url", default=os.environ.get("KILOCARD_PROMETHEUS_URL"),
                   help="Prometheus of the SLO probes (configuration kilocard_prometheus_url; else "
                        "$KILOCARD_PROMETHEUS_URL)")
    _prometheus_token_flag(p)
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG, ~/.kube/config, in-cluster, else the local testbed's")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--ledger-dir", type=_ledger_dir, default="",
                   help="where the run's ledger is kept ($KILOCARD_LEDGER, else ~/.local/state/kilocard/ledger)")
    p.add_argument("--reports", type=Path, default=Path(os.environ.get("KILOCARD_REPORTS", "reports")),
                   help="where each run's report goes (<run id>/index.html), and the trend over all of them "
                        "(trend/index.html); default $KILOCARD_REPORTS, else reports")
    p.add_argument("--no-report", action="store_true", help="write the journal only")
    _testbed_flag(p)


def _testbed_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--testbed", action="store_true",
                   help="with no cluster named, start the local testbed with the default fleet if it is not running "
                        "(without this flag, only an interactive terminal outside CI starts it; else exit 2)")


def _prometheus_token_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prometheus-token-file", type=Path, metavar="FILE",
                   help="a bearer token for Prometheus (else $KILOCARD_PROMETHEUS_TOKEN); it is sent, never written")
    p.add_argument("--prometheus-ca", type=Path, metavar="FILE",
                   help="the CA bundle that signed Prometheus's certificate (else $KILOCARD_PROMETHEUS_CA, else the "
                        "system's CAs); TLS is always verified")
    p.add_argument("--prometheus-insecure", action="store_true",
                   help="do not verify Prometheus's certificate, and allow its token over plain http (else "
                        "$KILOCARD_PROMETHEUS_INSECURE=1)")
    p.add_argument("--prometheus-basic-auth-file", type=Path, metavar="FILE",
                   help="'user:password' for Prometheus's basic auth (else $KILOCARD_PROMETHEUS_BASIC_AUTH); sent, "
                        "never written")
    p.add_argument("--prometheus-cert", type=Path, metavar="FILE",
                   help="a client certificate for a Prometheus that asks for one (mutual TLS), with --prometheus-key")
    p.add_argument("--prometheus-key", type=Path, metavar="FILE", help="the client certificate's key")
    p.add_argument("--prometheus-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="a header with every call, e.g. a multi-tenant backend's tenant ('X-Scope-OrgID: team-a' "
                        "for Grafana Mimir or Cortex, 'THANOS-TENANT: team-a'); repeatable")
    p.add_argument("--grafana-url", default=os.environ.get("KILOCARD_GRAFANA_URL"), metavar="URL",
                   help="each fault as an annotation region in this Grafana (configuration kilocard_grafana_url; else "
                        "$KILOCARD_GRAFANA_URL), with --grafana-token-file")
    p.add_argument("--grafana-token-file", type=Path, metavar="FILE",
                   help="a Grafana service account token (else $KILOCARD_GRAFANA_TOKEN); sent, never written")
    for part, spellings in (("pod", "exported_pod, pod, kubernetes_pod_name, pod_name"),
                            ("namespace", "namespace, exported_namespace, kubernetes_namespace")):
        p.add_argument(f"--prometheus-{part}-label", metavar="LABEL",
                       default=os.environ.get(f"KILOCARD_PROMETHEUS_{part.upper()}_LABEL"),
                       help=f"the label naming a series' {part} (configuration kilocard_prometheus_{part}_label; else "
                            f"$KILOCARD_PROMETHEUS_{part.upper()}_LABEL; else the first of {spellings} the series "
                            "carry)")


def _credential(flag: str, path: Path | None, env: str, check: Callable[[str], str] = str) -> None:
    """A credential file's content (as `check` accepts it: it raises SpecError, else returns it)
    into the environment the probes and the run read it from, never into the configuration, which
    journals keep. Nothing without the flag."""
    if path is None:
        return
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise SpecError(f"{flag}: cannot read {path}: {exc.strerror}") from None
    os.environ[env] = check(text)


def _prometheus_access(args: argparse.Namespace) -> None:
    """How to reach Prometheus, into the environment where the probes read it (the token file's
    content, the CA, the insecure switch): never into the configuration, which journals keep."""
    from probes import slo

    _credential("--prometheus-token-file", getattr(args, "prometheus_token_file", None), slo.TOKEN_ENV)
    ca = getattr(args, "prometheus_ca", None)
    if ca is not None:
        if not ca.is_file():
            raise SpecError(f"--prometheus-ca: no such file {ca}")
        os.environ[slo.CA_ENV] = str(ca.resolve())
    if getattr(args, "prometheus_insecure", False):
        os.environ[slo.INSECURE_ENV] = "1"
    basic = getattr(args, "prometheus_basic_auth_file", None)

    def user_and_password(text: str) -> str:
        if not text.partition(":")[0] or ":" not in text:
            raise SpecError(f"--prometheus-basic-auth-file: {basic}: expected one line 'user:password'")
        return text

    _credential("--prometheus-basic-auth-file", basic, slo.BASIC_ENV, user_and_password)
    pair = [getattr(args, f"prometheus_{part}", None) for part in ("cert", "key")]
    if any(pair):
        if not all(pair):
            raise SpecError("--prometheus-cert and --prometheus-key: give both")
        for flag, path in zip(("--prometheus-cert", "--prometheus-key"), pair, strict=True):
            if not path.is_file():
                raise SpecError(f"{flag}: no such file {path}")
        os.environ[slo.CERT_ENV], os.environ[slo.KEY_ENV] = (str(path.resolve()) for path in pair)
    given = getattr(args, "prometheus_header", None) or []
    if given:
        try:
            slo.headers_of("\n".join(given), "--prometheus-header")
        except slo.SloError as exc:
            raise SpecError(str(exc)) from None
        os.environ[slo.HEADERS_ENV] = "\n".join(given)


def _experiment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiments", nargs="+", type=Path, metavar="EXPERIMENT",
                   help="Chaos Toolkit experiment files (YAML or JSON), or folders of them")
    _var_flags(p)


class _NamespaceVar(argparse.Action):
    """-n NAME: one more --var, namespace=NAME, in its place on the command line (a later --var of
    the same key wins, as it would over an earlier one)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.var = [*(getattr(namespace, "var", None) or []), f"namespace={values}"]


def _var_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--var", action="append", default=[], metavar="KEY[:TYPE]=VALUE",
                   help="configuration value, as chaos run --var (type str, int, float or bytes); in a game day, "
                        "after each step's own")
    p.add_argument("-n", "--namespace", action=_NamespaceVar, dest="var", metavar="NAME", default=argparse.SUPPRESS,
                   help="the namespace the experiments act on, as kubectl's -n: shorthand for --var namespace=NAME "
                        "(every catalog experiment reads ${namespace})")
    p.add_argument("--var-file", action="append", default=[], help="configuration/secrets file, as chaos run")


ORDER_FILE = "order.yaml"  # a folder's declared order: a YAML list of its files' names


def _experiment_files(paths: list[Path]) -> list[Path]:
    """Files as given; folders give their *.yaml, *.yml and *.json files in the order the folder
    declares (ORDER_FILE), the rest after them in natural order (s2 before s10)."""
    return [f for path in paths for f in (_folder(path)[0] if path.is_dir() else [path])]


def _folder(path: Path) -> tuple[list[Path], list[str]]:
    """A folder's experiment files in their order, and what is wrong with its ORDER_FILE."""
    files = sorted((p for p in path.iterdir() if p.suffix in EXPERIMENT_SUFFIXES and p.name != ORDER_FILE),
                   key=lambda p: natural_key(p.name))
    order = path / ORDER_FILE
    if not order.is_file():
        return files, []
    try:
        names = input_file.read(order)
    except SpecError as exc:
        return files, [str(exc)]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return files, [f"{order}: expected a list of this folder's file names, in the order to run them"]
    by_name = {p.name: p for p in files}
    problems = [f"{order}: entry {i}: no experiment file {n!r} in {path}" for i, n in enumerate(names)
                if n not in by_name]
    problems += [f"{order}: entry {i}: {n!r} is named before" for i, n in enumerate(names) if n in names[:i]]
    listed = [by_name[n] for n in dict.fromkeys(names) if n in by_name]
    return listed + [p for p in files if p.name not in names], problems


def _settle(args: argparse.Namespace, journal: dict[str, Any], console: Any) -> None:
    """Before the next experiment of a folder run: the models the last one touched whole again
    (chaos.settle), or said plainly that they are not when the timeout runs out."""
    from chaos import settle
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig

    models = settle.touched(journal)
    if not models:
        return
    kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    try:
        took, left = settle.settle(kube, models, args.settle_timeout)
    finally:
        kube.close()
    names = ", ".join(f"{ns}/{m}" for ns, m in models)
    if left:
        console.print(f"settle: not whole after {took:.0f} s ({'; '.join(left)}); the next experiment runs on that",
                      soft_wrap=True)
    else:
        console.print(f"settle: {names} whole again after {took:.1f} s", soft_wrap=True)


def _experiments(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The experiment files of `kilocard run` and `validate`, and what is wrong with the paths that
    give none: a folder without an experiment file, a path that is neither a file nor a folder."""
    problems = []
    for path in paths:
        if path.is_dir():
            files, wrong = _folder(path)
            problems += wrong or ([] if files else [f"no experiment files in {path}: expected *.yaml, *.yml or *.json"])
        elif not path.is_file():
            problems.append(f"{path}: " + ("not a file or folder" if path.exists() else "no such file or folder"))
    return _experiment_files([p for p in paths if p.is_dir() or p.is_file()]), problems


def cmd_completion(args: argparse.Namespace) -> int:
    """The completion script shtab writes from this very parser (the testbed's commands included)."""
    import shtab

    try:
        parser = build_parser(with_testbed=True)
    except ModuleNotFoundError:  # without the [testbed] extra: the rest of kilocard's commands
        parser = build_parser()
    print(shtab.complete(parser, shell=args.shell))
    return Exit.PASSED




def cmd_catalog(args: argparse.Namespace) -> int:
    if args.path:
        print(CATALOG)
        return Exit.PASSED
    print(f"the catalog, in {CATALOG} (copy it to change it; `kilocard validate` checks a copy):")
    for path in sorted(CATALOG.rglob("*.yaml"),
                       key=lambda p: (str(p.relative_to(CATALOG).parent), natural_key(p.name))):
        data = input_file.read(path) or {}
        print(f"  {str(path.relative_to(CATALOG)):<44} {data.get('title', '') if isinstance(data, dict) else ''}")
    return Exit.PASSED


def cmd_schema(_args: argparse.Namespace) -> int:
    from chaos import schemas

    print(json.dumps(schemas.document(), indent=2))
    return Exit.PASSED


def cmd_validate(args: argparse.Namespace) -> int:
    """Every file's problems, and every path's, at once (exit 2): experiments, fault files,
    game-day plans and incident timelines, each known by its shape."""
    files, problems = _experiments(args.experiments)
    found = [{"file": None, "valid": False, "what": None, "problems": [p]} for p in problems]
    for path in files:
        try:
            found.append({"file": str(path), "valid": True, "what": _validated(path, args), "problems": []})
        except SpecError as exc:
            found.append({"file": str(path), "valid": False, "what": None, "problems": str(exc).splitlines()})
    if not emit(found, args.output):
        for entry in found:
            if entry["valid"]:
                print(f"{entry['file']}: valid ({entry['what']})")
            else:
                print("\n".join(entry["problems"]), file=sys.stderr)
    return Exit.INVALID if any(not e["valid"] for e in found) else Exit.PASSED


def _validated(path: Path, args: argparse.Namespace) -> str:
    """Check one file as what it is (SpecError lists its problems); what it holds, in words."""
    from chaos import gameday, plan, replay, run

    data = input_file.read(path)
    if isinstance(data, list) or (isinstance(data, dict) and "kind" in data and "method" not in data):
        parsed = plan.parse_all(plan.entries(data if isinstance(data, list) else [data], str(path)))
        return f"a fault file: {len(parsed)} fault(s)"
    if isinstance(data, dict) and "steps" in data and "method" not in data:
        day = gameday.load(path, args.var)
        return f"a game-day plan: {len(day.steps)} step(s)"
    if isinstance(data, dict) and "faults" in data and "method" not in data:
        timeline = replay.load(path)
        return f"an incident timeline: {len(timeline.entries)} fault(s)"
    experiment = run.load(path, args.var, args.var_file)
    return f"{len(experiment.faults)} kilocard fault(s)"


def cmd_run(args: argparse.Namespace) -> int:
    from chaos import run

    files, problems = _experiments(args.experiments)
    for path in files:  # every file read and checked before anything starts (not even the testbed)
        try:
            run.load(path, args.var, args.var_file)
        except SpecError as exc:
            problems.append(str(exc))
    problems += _unwritable(args)
    if problems:
        raise SpecError("\n".join(problems))
    _embedded_default(args)
    variables = [*args.var, *_kilocard_vars(args)]
    console = _console(args)
    results = []
    for path in files:
        if results and args.settle_timeout > 0:
            _settle(args, results[-1].journal, console)
        result = _run_one(args, console, path, variables)
        results.append(result)
        journal = _journal_path(args.journal, result, several=len(files) > 1)
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(result.journal, indent=2, default=str))
        console.print(f"journal {journal}", soft_wrap=True)
        if not args.no_report:
            console.print(f"report {_report(result.journal, journal, args.reports)}", soft_wrap=True)
    if len(results) > 1:
        _verdict_table(results, console)
    if results and not args.no_report:
        console.print(f"trend {_trend(args.reports)}", soft_wrap=True)
    return max((r.exit for r in results), default=Exit.PASSED)


def _console(args: argparse.Namespace) -> Any:
    """The console a run prints on, and with -v Chaos Toolkit's log on stderr."""
    import logging

    from rich.console import Console

    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        for name in ("chaostoolkit", "chaostoolkit-lib"):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
    return Console(highlight=False)


def _run_one(args: argparse.Namespace, console: Any, path: Path, variables: list[str]) -> Any:
    """One experiment: the live view and the summary, or with -q its verdict in one line."""
    from chaos import actions, run, timeline

    if args.quiet:
        result = run.run_file(path, variables, args.var_file, actions.session)
        console.print(f"{path}: {result.exit.name.lower()} (exit {int(result.exit)}): {result.reason}",
                      soft_wrap=True, markup=False)
        return result
    console.rule(str(path))
    result = run.run_file(path, variables, args.var_file, actions.session, view=timeline.Timeline(console))
    console.print(timeline.summary(result))
    return result


def _report(journal: dict[str, Any], path: Path, root: Path) -> Path:
    from chaos import report

    return report.write(report.parse(journal, path), root)


def _trend(root: Path) -> Path:
    """The trend page over every run reported under `root` (its history)."""
    from chaos import report

    runs = []
    for path in sorted(root.glob("*/journal.json")):
        try:
            runs.append(report.load(path))
        except SpecError as exc:  # a stray folder is not a reason to lose the page
            print(f"kilocard: skipped {exc}", file=sys.stderr)
    return report.write_trend(runs, root)


def _journal_files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        found += sorted([*path.glob("*.json"), *path.glob("*/journal.json")]) if path.is_dir() else [path]
    return found


def _kilocard_vars(args: argparse.Namespace) -> list[str]:
    """The cluster flags of a command that runs experiments, as the runner's configuration (the
    Prometheus and Grafana credentials go to the environment instead)."""
    _prometheus_access(args)
    from chaos import grafana

    grafana_url = getattr(args, "grafana_url", None)
    _credential("--grafana-token-file", getattr(args, "grafana_token_file", None), grafana.TOKEN_ENV)
    if grafana_url:
        grafana.session(grafana_url)  # a URL it cannot use, or a token in cleartext: input, said now
    # A label name PromQL cannot hold is input, said now: not a probe error mid-run.
    Settings.of({key(part): getattr(args, part) for part in ("prometheus_pod_label", "prometheus_namespace_label")})
    return [f"{name}={value}" for name, value in (
        (key("kubeconfig"), args.kubeconfig), (key("context"), args.context),
        (key("prometheus_url"), args.prometheus_url), (key("ledger_dir"), args.ledger_dir),
        (key("prometheus_pod_label"), args.prometheus_pod_label),
        (key("prometheus_namespace_label"), args.prometheus_namespace_label), (key("grafana_url"), grafana_url))
        if value is not None]


def cmd_gameday_run(args: argparse.Namespace) -> int:
    from chaos import gameday, report
    from chaos.gameday import store, view

    plan = gameday.load(args.plan, args.var)  # every step's experiment too: exit 2 before anything starts
    unwritable = _unwritable(args)
    if unwritable:
        raise SpecError("\n".join(unwritable))
    _embedded_default(args)
    console = _console(args)
    runs: list[Any] = []  # each experiment's, as its report read it

    def run_one(path: Path, variables: list[str]) -> Any:
        result = _run_one(args, console, path, [*variables, *args.var, *_kilocard_vars(args)])
        if not args.no_report:
            runs.append(report.parse(result.journal, path))
            console.print(f"report {report.write(runs[-1], args.reports)}", soft_wrap=True)
        return result

    kube = None
    if plan.config_maps or args.summary_configmap:
        from chaos.kube import Kube
        from chaos.vocabulary import local_testbed_kubeconfig

        kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    journals = args.journal or args.reports / "journals"
    try:
        day = gameday.run(plan, run_one, kube=kube, observer=view.Rows(console), journals=journals)
        if kube is not None and args.summary_configmap:
            store.publish(kube, _own_namespace(), args.summary_configmap, day.to_json())
    finally:
        if kube is not None:
            kube.close()
    console.print(view.summary(day))
    console.print(f"journal {store.write(journals, day.file_name, day.to_json())}", soft_wrap=True)
    if not args.no_report:
        stamp = day.started_at.strftime("%Y%m%dT%H%M%S")
        trend = _trend(args.reports) if runs else None
        if trend is not None:
            console.print(f"trend {trend}", soft_wrap=True)
        page = report.write_gameday(day.to_json(), runs, args.reports, f"gameday-{args.plan.stem}-{stamp}", trend)
        console.print(f"report {page}", soft_wrap=True)
    return day.exit


def _own_namespace() -> str:
    """In a pod, its ServiceAccount's namespace; else kilocard's own."""
    from chaos.kube import SERVICE_ACCOUNT_DIR

    found = Path(SERVICE_ACCOUNT_DIR) / "namespace"
    return found.read_text().strip() if found.is_file() else "kilocard-system"


def cmd_gameday_schedule(args: argparse.Namespace) -> int:
    from chaos import gameday

    plan = gameday.load(args.plan, args.var)
    variables = [*args.var, *([f"kilocard_prometheus_url={args.prometheus_url}"] if args.prometheus_url else [])]
    print(gameday.dump(gameday.schedule(
        plan, args.cron, image=args.image, namespace=args.namespace, storage=args.storage, name=args.name,
        variables=variables, storage_size=args.storage_size, storage_class=args.storage_class,
        starting_deadline_seconds=args.starting_deadline)), end="")
    return Exit.PASSED


def cmd_replay(args: argparse.Namespace) -> int:
    """The timeline as an experiment (kept under reports/replays/), run as any experiment is."""
    from chaos import replay

    timeline = replay.load(args.timeline)
    _embedded_default(args)
    _resolved(args, timeline)
    path = args.reports / "replays" / f"{args.timeline.stem}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(replay.experiment(timeline, args.expect), sort_keys=False))
    if args.twin:
        args.experiment, args.output = path, "text"
        return _plan_experiment(args)
    args.experiments = [path]
    return cmd_run(args)


def _resolved(args: argparse.Namespace, timeline: Any) -> None:
    """What only the cluster can tell, nothing applied: faults named by selectors that overlap once
    resolved, and faults that touch no replica of the model the incident's symptoms name."""
    from chaos import guards, plan, replay
    from probes import snapshot

    ctx = _context(args, ledger.new_run_id())
    try:
        resolved = plan.plan(ctx, [(e.fault, e.where) for e in timeline.entries], [e.span for e in timeline.entries])
        reached = guards.reached(resolved, snapshot.fetch(ctx.kube, ctx.card_resource))
    finally:
        ctx.kube.close()
    targets = {i: replay.resolved_targets(f.records) for i, f in enumerate(resolved.faults)}
    problems = replay.overlaps(timeline.entries, targets, str(args.timeline))
    problems += replay.unreached(timeline, reached, str(args.timeline), args.expect)
    if problems:
        raise SpecError("\n".join(problems))


def _moment(value: str, flag: str) -> float:
    from chaos.vocabulary import epoch

    try:
        return float(value)
    except ValueError:
        pass
    try:
        return float(epoch(value) or 0)
    except ValueError:
        raise SpecError(f"{flag}: expected RFC 3339 (2026-12-01T14:44:00Z) or epoch seconds, got {value!r}") from None


def cmd_record(args: argparse.Namespace) -> int:
    from chaos import record

    if args.tolerance < 0:
        raise SpecError(f"--tolerance: expected seconds (0 or more), got {args.tolerance:g}")
    maps = {"alerts": dict(record.ALERT_FAULTS), "events": dict(record.EVENT_FAULTS),
            "conditions": dict(record.CONDITION_FAULTS), "device_taints": dict(record.DEVICE_TAINT_FAULTS)}
    for section, extra in (_mapping(args.mapping) if args.mapping else {}).items():
        maps[section].update(extra or {})
    alert_map, event_map, condition_map, taint_map = maps.values()
    if args.journal is not None:
        if args.slo:
            raise SpecError("--slo: reads a cluster's range (--since, --until); a journal's run judged its own SLOs")
        return _record_journal(args, alert_map)
    slos = _slo_args(args)
    if args.gameday_step is not None:
        raise SpecError("--gameday-step: names a step of a game day's journal; give the journal with --journal")
    if args.since is None or args.until is None:
        raise SpecError("--since and --until: required, the incident's range (or --journal: a past run's journal)")
    start, end = _moment(args.since, "--since"), _moment(args.until, "--until")
    if end <= start:
        raise SpecError(f"--until: {args.until} is not after --since {args.since}")
    end = min(end, time.time())  # an alert firing now has no end yet, whatever --until says
    sightings, others = [], []
    if args.prometheus_url:
        series = _alert_series(args, start, end)
        sightings, others = record.faults_from_alerts(series, args.step, end, alert_map)
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig

    deletions = [d for path in args.audit_log for d in record.audit_deletions(_lines(path), start, end)]
    kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    try:
        events = record.events(kube, args.namespace, start, end)
        now, unread_pods = _pods_now(kube, ["default", *args.namespace])  # where events() reads
        # A Ready after the range is a later one (the pod has gone NotReady and back since).
        ready = {pod: at for pod, at in record.ready_times(now).items() if at <= end}
        deletions += record.kubelet_deletions(events)
        targets = _sibling_targets(kube, {pod for _, pod, _ in deletions})
        nodes = kube.list_nodes_raw()
        rules, slices, unread = _device_taints(kube)
    finally:
        kube.close()
    sightings += record.faults_from_events(events, event_map)
    deletions = record.unexplained(deletions, events, targets, args.namespace)
    sightings += record.faults_from_deletions(deletions, targets)
    marked, skipped = record.faults_from_conditions(nodes, condition_map, start, end)
    tainted, untold = record.faults_from_device_taints(rules, slices, taint_map, start, end)
    source = {"since": args.since, "until": args.until, "namespaces": args.namespace,
              "alerts": bool(args.prometheus_url), "events": len(events), "deletions": len(deletions),
              "conditions": len(marked), "device_taints": len(tainted),
              **({"not_replayed": skipped + untold} if skipped or untold else {}),
              **({"not_read": unread} if unread else {})}
    slo_found, unread_slo = _slo_readings(args, slos, now, start, end)
    if unread_slo or unread_pods:
        source["not_read"] = [*source.get("not_read", []), *unread_pods, *unread_slo]
    data = record.timeline(args.title or "recorded incident", sightings + marked + tainted, events, others, source,
                           {"namespace": args.namespace[0]} if args.namespace else None,
                           [(at, pod) for at, pod, _ in deletions], args.tolerance,
                           remediated=record.remediation(nodes, start, end), ready=ready, slo_found=slo_found,
                           end=end)
    return _recorded(args.output, data)


def _recorded(output: Path, data: dict[str, Any]) -> int:
    output.write_text(yaml.safe_dump(data, sort_keys=False))
    found = data["symptoms"]
    print(f"timeline {output}: {len(data['faults'])} fault(s), {len(data['recorded']['recovery'])} replica(s) "
          f"recovering, {len(data['recorded']['alerts'])} other alert(s); symptoms to reproduce: "
          f"{len(found['alerts'])} alert(s), {len(found['replicas'])} replica(s), within {found['tolerance']:g} s"
          + ("" if data["source"].get("alerts", True) else " (no --prometheus-url: no alert read)"))
    return Exit.PASSED


def _slo_args(args: argparse.Namespace) -> list[tuple[str, float]]:
    """--slo INDICATOR=THRESHOLD, each checked before anything is read."""
    from probes.incident import SLO_INDICATORS
    from probes.slo import SloError, seconds

    found = []
    for text in args.slo:
        kind, _, value = text.partition("=")
        try:
            threshold = float(value)
        except ValueError:
            threshold = -1.0
        if kind not in SLO_INDICATORS or not threshold > 0:
            raise SpecError(f"--slo {text}: expected INDICATOR=THRESHOLD, the indicator one of "
                            f"{', '.join(SLO_INDICATORS)} and the threshold a number above 0 (e.g. ttft_p95=0.5)")
        found.append((kind, threshold))
    if found and not args.prometheus_url:
        raise SpecError("--slo: the indicators are read from Prometheus: give --prometheus-url (or "
                        "$KILOCARD_PROMETHEUS_URL)")
    if found and not args.namespace:
        raise SpecError("--slo: its models are those the -n namespaces serve: give -n NAMESPACE")
    try:
        window = seconds(args.slo_window)
    except SloError as exc:
        raise SpecError(f"--slo-window: {exc}") from None
    if window <= 0:
        raise SpecError(f"--slo-window: expected a rate window above 0, got {args.slo_window!r}")
    return found


def _pods_now(kube: Any, namespaces: list[str | None]) -> tuple[list[dict[str, Any]], list[str]]:
    """The namespaces' pods (replacements' Ready times, the models --slo reads), or why not: an
    account that may read Events but not Pods still records the rest."""
    from chaos import record
    from chaos.errors import KubeError

    try:
        return record.pods(kube, namespaces), []
    except KubeError as exc:
        return [], [f"pods (Ready times, --slo's models): {exc}"]


def _slo_readings(args: argparse.Namespace, slos: list[tuple[str, float]], pods: list[dict[str, Any]],
                  start: float, end: float) -> tuple[list[tuple[dict[str, Any], list[Any]]], list[str]]:
    """Each (model, --slo) of the models the -n namespaces' pods serve, over the range; what could
    not be read, said."""
    from chaos import record
    from probes import slo
    from probes.metric_names import MetricNotFound

    if not slos:
        return [], []
    _prometheus_access(args)
    prom = slo.connect(args.prometheus_url)
    found, unread = [], []
    models = [(ns, model) for ns, model in record.models(pods) if ns in args.namespace]
    if not models:
        unread.append(f"slo: no model served in {', '.join(args.namespace)} now (kilocard's label, or a serving "
                      "stack's pods): nothing to read")
    for ns, model in models:
        for kind, threshold in slos:
            entry = {"model": model, "namespace": ns, "indicator": kind, "threshold": threshold,
                     "window": args.slo_window}
            try:
                found.append((entry, record.slo_readings(prom, entry, start, end, args.step, 0.0)))
            except MetricNotFound as exc:  # a model that exports no such series (an embedding model's TTFT)
                unread.append(f"slo {kind} of {ns}/{model}: {exc}")
    return found, unread


def _alert_series(args: argparse.Namespace, start: float, end: float) -> list[dict[str, Any]]:
    from chaos import record
    from probes import slo

    _prometheus_access(args)
    return record.alert_series(slo.connect(args.prometheus_url), start, end, args.step)


def _device_taints(kube: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(DeviceTaintRules, ResourceSlices, what could not be read and why): a cluster without DRA
    serves neither; an account without the right reads neither, and the timeline says so."""
    from chaos.errors import KubeError

    found, unread = [], []
    for what, path in (("devicetaintrules", "/apis/resource.k8s.io/v1beta2/devicetaintrules"),
                       ("resourceslices", "/apis/resource.k8s.io/v1/resourceslices")):
        try:
            found.append(kube.list_raw(f"list {what}", path))
        except KubeError as exc:
            if exc.status not in (403, 404):
                raise
            found.append([])
            unread.append(f"{what}: {exc}")
    return found[0], found[1], unread


def _record_journal(args: argparse.Namespace, alert_map: dict[str, Any]) -> int:
    """`record --journal`: a past run (or a game day's step) as a timeline; alerts over its range."""
    from chaos import record
    from chaos.vocabulary import epoch

    if args.since is not None or args.until is not None:
        raise SpecError("--since/--until: a journal's run sets the range; give one or the other")
    where, journal = _run_journal(args.journal, args.gameday_step)
    others = None
    if args.prometheus_url:
        start, end = epoch(journal.get("start")), epoch(journal.get("end"))
        if start is None or end is None:
            raise SpecError(f"{where}: no start or end: not a finished run's journal")
        _, others = record.faults_from_alerts(_alert_series(args, start, end), args.step, end, alert_map)
    return _recorded(args.output, record.from_journal(journal, where, args.title, others, args.tolerance))


def _run_journal(path: Path, step: str | None) -> tuple[str, dict[str, Any]]:
    """(where, journal) of one run: the file itself, or the step's journal of a game day's."""
    journal = _json_file(path)
    if "steps" not in journal:
        if step is not None:
            raise SpecError(f"--gameday-step: {path} is one run's journal, not a game day's")
        return str(path), journal
    ran = [s for s in journal["steps"] if isinstance(s, dict) and s.get("journal")]
    names = ", ".join(f"{i} ({s.get('id')})" for i, s in enumerate(journal["steps"], 1) if s in ran) or "none"
    chosen = next((s for i, s in enumerate(journal["steps"], 1) if step in (s.get("id"), str(i))), None)
    if step is None or chosen not in ran:
        raise SpecError(f"--gameday-step: {path} is a game day's journal; name one of its steps that ran an experiment "
                        f"({names}), got {step!r}")
    found = Path(chosen["journal"])
    if not found.is_file():  # written relative to where the game day ran; else beside its journal
        found = path.parent / found.name
    return str(found), _json_file(found)


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise SpecError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SpecError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a journal (a JSON object), got {type(data).__name__}")
    return data


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError as exc:
        raise SpecError(f"--audit-log {path}: {exc.strerror or exc}") from None


def _sibling_targets(kube: Any, pods: set[str]) -> dict[str, dict[str, str] | None]:
    """namespace/pod -> what selects its siblings (chaos.record.target_of), from a pod of its
    owner that is there now (the deleted one is gone; its replacement carries the same labels)."""
    from chaos import record
    from probes import snapshot
    from probes.incident import owner

    found: dict[str, dict[str, str] | None] = {}
    for namespace in sorted({p.split("/", 1)[0] for p in pods}):
        live = kube.list_pods_raw(namespace)
        identities = snapshot.identities(live)  # once per namespace, for every deleted pod in it
        for pod in (p for p in pods if p.startswith(f"{namespace}/")):
            name = pod.split("/", 1)[1]
            sibling = next((x for x in live if x["metadata"]["name"] == name or
                            owner(x["metadata"]["name"]) == owner(name)), None)
            found[pod] = record.target_of(sibling, identities) if sibling is not None else None
    return found


def _mapping(path: Path) -> dict[str, Any]:
    data = input_file.read(path)
    sections = ("alerts", "events", "conditions", "device_taints")
    if not isinstance(data, dict) or set(data) - set(sections):
        raise SpecError(f"{path}: expected a mapping with any of {', '.join(sections)} (name -> {{lead, fault}})")
    for section in sections:
        for name, entry in (data.get(section) or {}).items():
            if not isinstance(entry, dict) or not isinstance(entry.get("fault"), dict):
                raise SpecError(f"{path}: {section}.{name}.fault: expected a fault template (a mapping)")
    return data


def cmd_report(args: argparse.Namespace) -> int:
    from chaos import report

    files = _journal_files(args.journals)
    runs, problems, days = [], [], []
    for path in files:
        try:
            day = _gameday_journal(path)
            if day is None:
                runs.append(report.load(path))
            else:
                days.append((path, day, _step_runs(path, day)))
        except SpecError as exc:
            problems.append(str(exc))
    if not files:
        problems.append(f"{', '.join(map(str, args.journals))}: no journal found")
    if args.compare and not problems and len(runs) != 2:
        problems.append(f"--compare: expected two journals, got {len(runs)}")
    if problems:  # nothing is written when any journal is bad
        raise SpecError("\n".join(problems))
    for run in runs:
        print(f"report {report.write(run, args.out)}")
    for path, day, of_day in days:
        print(f"game day {report.write_gameday(day, of_day, args.out, path.stem, None)}")
    if args.compare:
        print(f"compare {report.compare(runs[0], runs[1], args.out)}")
    elif len(runs) > 1:
        print(f"trend {report.write_trend(runs, args.out)}")
    return Exit.PASSED


def _step_runs(path: Path, day: dict[str, Any]) -> list[Any]:
    """The runs of a game day's experiment steps, from their journals; one that cannot be read
    is said and left out (the day's page still shows the step, its verdict and its reason)."""
    from chaos import report

    runs = []
    for step in day["steps"]:
        if step.get("journal"):
            try:
                runs.append(report.load(_beside(path, step["journal"])))
            except SpecError as exc:
                print(f"kilocard: {step.get('id')}: no report of its run: {exc}", file=sys.stderr)
    return runs


def _beside(day: Path, step: str) -> Path:
    """A step's journal as the game day wrote it, else the file of that name beside the game day's
    journal (both are written into one folder; the day's paths are relative to where it ran)."""
    written = Path(step)
    return written if written.is_file() else day.parent / written.name


def _gameday_journal(path: Path) -> dict[str, Any] | None:
    """A game day's journal (chaos.gameday.store.write), or None for anything else."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # the run journal's reader says what is wrong with it
    return data if isinstance(data, dict) and "plan_file" in data and isinstance(data.get("steps"), list) else None


def _embedded_default(args: argparse.Namespace) -> None:
    """No cluster named: the local testbed, said so; not running, it is started with the default
    fleet (the embedded default) where that was asked for (--testbed) or someone is at the
    terminal outside CI. Anywhere else (a CI job whose kubeconfig went missing) it is refused:
    a run against a local fake is not a check of the cluster that was meant."""
    from chaos.kube import cluster_named
    from chaos.vocabulary import local_testbed_kubeconfig

    if cluster_named(args.kubeconfig):
        return
    if local_testbed_kubeconfig() is not None:
        print("cluster: the local testbed (running; no --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster "
              "account named another)", file=sys.stderr)
        return
    if not (args.testbed or (sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("CI"))):
        raise SpecError("no cluster named (no --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster account) and "
                        "no local testbed running: name the cluster, or give --testbed to start the local testbed")
    from chaos import timeline
    from testbed import cli as testbed_cli

    with timeline.progress("no cluster named: starting the local testbed with the default fleet") as update:
        args.kubeconfig = str(testbed_cli.embedded_default(say=update))


def _verdict_table(results: list[Any], console: Any) -> None:
    from rich.text import Text

    from chaos.timeline import COLOUR, Reasoned

    table = Reasoned("experiment", "verdict", "expected", "exit", title="kilocard run")
    for r in results:
        k = r.journal.get("kilocard") or {}
        verdict = k.get("verdict", r.exit.name.lower())
        expected = k.get("expected")
        table.add_row(r.path.name, Text(verdict, style=COLOUR[r.exit]),
                      "-" if not expected else Exit(expected["exit"]).name.lower(), str(int(r.exit)),
                      reason=r.reason.splitlines()[0].removeprefix(f"{r.path}: "))
    console.print(table)


def _unwritable(args: argparse.Namespace) -> list[str]:
    """The run's output folders that a file stands in the way of (the folder, or one above it):
    said before anything starts, as input, not found when the first report is written."""
    journal = getattr(args, "journal", None)
    given = (("--ledger-dir (or $KILOCARD_LEDGER)", args.ledger_dir, args.ledger_dir),
             ("--reports (or $KILOCARD_REPORTS)", args.reports, None if args.no_report else args.reports),
             ("--journal", journal, journal.parent if journal is not None else None))
    problems = []
    for flag, path, folder in given:
        try:
            existing = next((p for p in (folder, *folder.parents) if p.exists()), None) if folder else None
        except OSError as exc:  # a name the system cannot look up (too long, a loop of links)
            problems.append(f"{flag}: {clipped(str(path))}: {exc.strerror}")
            continue
        if existing is not None and not existing.is_dir():
            problems.append(f"{flag}: {path}: {existing} is a file, not a folder")
    return problems


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
        return _in_namespace([input_file.parse(args.spec, "--spec", as_json=True)], args.namespace), "--spec"
    data = input_file.read(args.file)
    return _in_namespace(data if isinstance(data, list) else [data], args.namespace), str(args.file)


def _in_namespace(raws: list[Any], namespace: str | None) -> list[Any]:
    """-n: the namespace of the faults that take one and name none (as kubectl's -n for a manifest)."""
    from chaos.schemas import FAULT_KINDS

    def takes_one(raw: Any) -> bool:
        kind = raw.get("kind") if isinstance(raw, dict) else None
        return isinstance(kind, str) and "namespace" not in raw \
            and "namespace" in (FAULT_KINDS.get(kind, {}).get("properties") or {})

    return [{**raw, "namespace": namespace} if namespace is not None and takes_one(raw) else raw for raw in raws]


def _planned(args: argparse.Namespace, run_id: str, duration: float | None = None) -> tuple[Any, Any]:
    """(context, plan): every entry parsed first (no cluster), then resolved and checked. With a
    `duration`, a hold the shortest TTL would cut short is refused before connecting too."""
    from chaos import plan

    raws, source = _load_faults(args)
    parsed = plan.parse_all(plan.entries(raws, source))  # bad input is found before connecting anywhere
    shortest = _shortest_ttl((module, spec) for _, module, spec, _options in parsed)
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
    from chaos import plan, run

    if args.experiment is not None:
        run.load(args.experiment, args.var)  # read and checked before any cluster, the testbed included
    else:
        raws, source = _load_faults(args)
        plan.parse_all(plan.entries(raws, source))
    _embedded_default(args)
    if args.experiment is not None:
        return _plan_experiment(args)
    ctx, planned = _planned(args, "plan")
    ctx.kube.close()
    if emit(planned.describe(), args.output):
        return 0
    for fault in planned.describe():
        print(f"{fault['where']}: {fault['kind']} on {len(fault['targets'])} target(s), ttl {fault['ttl_seconds']:g} s")
        for target in fault["targets"]:
            print(f"  {json.dumps(target)}")
    return 0


def _plan_experiment(args: argparse.Namespace) -> int:
    from chaos import actions, run

    experiment = run.load(args.experiment, args.var)
    configuration = {**(experiment.data.get("configuration") or {}), key("ledger_dir"): str(args.ledger_dir),
                     key("card_resource"): args.card_resource}
    configuration.update({k: v for k, v in ((key("kubeconfig"), args.kubeconfig), (key("context"), args.context),
                                            (key("prometheus_url"), args.prometheus_url)) if v is not None})
    ctx, _book = actions.session({**configuration, key("run_id"): ledger.new_run_id()})
    try:
        prom = Settings.of(configuration).prometheus() if experiment.load else None
        found = run.check(ctx, experiment, prom=prom)
    finally:
        ctx.kube.close()
    if emit(found, args.output):
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
    for warning in found.get("warnings", []):
        print(f"warning: {warning}")
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
        _on_twin(experiment, twin)
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
        print(f"kilocard: revert incomplete: {record.kind} {describe_target(record.target)}: {record.error}; "
              f"run 'kilocard recover --run {run_id}'", file=sys.stderr)
    if outcome.left:
        return Exit.REVERT_INCOMPLETE
    print(f"{run_id}: reverted", flush=True)
    if outcome.error is not None:
        return exit_code(outcome.error)
    if outcome.skipped:
        return Exit.ABORTED
    return Exit.FAILED if outcome.failed else Exit.PASSED


def cmd_load(args: argparse.Namespace) -> int:
    fields = ("url", "model", "qps", "prompt_tokens", "output_tokens", "duration_seconds", "api", "seed",
              "max_in_flight", "timeout_seconds", "token_env", "token_file", "prefix_share", "burst_factor",
              "burst_seconds", "burst_every_seconds")
    spec = traffic.parse({f: getattr(args, f) for f in fields if getattr(args, f) is not None}, "kilocard load",
                         flags=True)
    if args.journal is not None and not args.journal.parent.is_dir():
        raise SpecError(f"--journal: no such folder {args.journal.parent}")
    running = traffic.Load(spec).start()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop early, and still say what was measured
        signal.signal(sig, lambda *_: running.halted.set())
    running.wait()
    record = running.stop()
    if args.journal is not None:
        args.journal.write_text(json.dumps({"kilocard": {"load": record}}, indent=2))
    found = record["summary"]
    if not emit(found, args.output):
        print("\n".join(traffic.lines(found)))
    return Exit.PASSED if found["ok"] else Exit.FAILED


def _fleet_now(args: argparse.Namespace, problems: list[str]) -> tuple[Any, Any, Any, Any, str]:
    """The snapshot, how the loads are read (chaos.hunt.Figures), the loads read from Prometheus
    (by model, and why a model has none) and where the cluster was read, once every flag is
    checked (SpecError)."""
    from chaos import hunt
    from chaos.kube import Kube, cluster_named
    from chaos.vocabulary import local_testbed_kubeconfig, local_testbed_prometheus
    from probes import slo
    from probes import snapshot as snap

    try:
        slo.seconds(args.window)
    except KilocardError as exc:
        problems.append(f"--window: {exc}")
    if problems:
        raise SpecError("\n".join(problems))
    _embedded_default(args)
    url = args.prometheus_url or (None if cluster_named(args.kubeconfig) else local_testbed_prometheus())
    kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    try:
        snapshot = snap.fetch(kube, args.card_resource)
    finally:
        kube.close()
    figures = hunt.Figures(args.window, args.peak, args.slo_ttft)
    if url is None:
        return snapshot, figures, {}, {"*": "no Prometheus named"}, kube.source
    loads, missing = hunt.loads(slo.connect(url), snapshot, figures, args.namespace)
    return snapshot, figures, loads, missing, kube.source


def cmd_hunt(args: argparse.Namespace) -> int:
    from chaos import hunt
    from probes import domains

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds else domains.KINDS
    labels = dict(domains.TOPOLOGY)
    problems = [f"--kinds: {k!r} is not a kind of domain; expected some of {', '.join(domains.KINDS)}"
                for k in kinds if k not in domains.KINDS]
    for given in args.topology_label:
        label, _, kind = given.partition("=")
        if not label or kind not in ("rack", "switch", "zone"):
            problems.append(f"--topology-label {given!r}: expected KEY=KIND, KIND one of rack, switch, zone")
        labels[label] = kind
    if args.confirm < 0:
        problems.append(f"--confirm: expected how many domains, from 0, got {args.confirm}")
    snapshot, figures, loads, missing, source = _fleet_now(args, problems)
    found = hunt.hunt(snapshot, loads, missing, figures, labels, kinds, args.namespace)
    if args.confirm:
        with contextlib.redirect_stdout(sys.stderr):  # the twins' progress; stdout is for -o json
            _confirm_on_twins(args, found)
    if args.page:
        from chaos.report import planning

        print(f"page {planning.hunt_page(found, args.page)}", file=sys.stderr)
    if emit(found, args.output):
        return Exit.PASSED
    print(f"cluster: {source}")
    print("\n".join(hunt.text(found, args.top)))
    return Exit.PASSED


def _confirm_on_twins(args: argparse.Namespace, found: dict[str, Any]) -> None:
    """hunt --confirm: each of the weakest domains lost on a fresh twin of the cluster, its
    experiment's verdict and journal kept, predicted against observed (chaos.confirm), written
    into `found` as the domain's `confirmed`. The real cluster is only read."""
    from chaos import actions, confirm, run, timeline, written
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig
    from testbed import cli as testbed_cli

    folder = args.page or Path(tempfile.mkdtemp(prefix="kilocard-hunt-"))
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [d for d in found["ranked"] if d["severity"] != "none"][:args.confirm]
    for i, domain in enumerate(chosen, 1):
        path = folder / f"confirm-{i}.yaml"
        path.write_text(yaml.safe_dump(confirm.experiment(domain, args.confirm_budget, args.slo_ttft, "10s"),
                                       sort_keys=False))
        experiment = run.load(path)
        namespaces = sorted({m["namespace"] for m in domain["models"]})
        real = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
        try:
            with timeline.progress(f"twin {i} of {len(chosen)}: copying the cluster to lose {domain['domain']}") as say:
                twin = testbed_cli.twin_up(real, namespaces, args.card_resource, args.twin_port_base,
                                           args.twin_timing, say)
        finally:
            real.close()
        try:
            _on_twin(experiment, twin)
            result = run.execute(experiment, actions.session)
        finally:
            testbed_cli.twin_down(twin)
            written.forget()  # the next twin has the same node names: this one's writes are not its
        journal = folder / f"confirm-{i}.json"
        journal.write_text(json.dumps(result.journal, indent=1, default=str))
        domain["confirmed"] = {**confirm.compare(domain, confirm.observed(domain, result.journal), int(result.exit)),
                               "verdict": result.reason, "journal": str(journal), "experiment": str(path)}
        print(f"{domain['domain']}: {domain['confirmed']['summary']}", file=sys.stderr)


def _on_twin(experiment: Any, twin: Any) -> None:
    """Point a loaded experiment at a twin: its cluster, Prometheus and ledger."""
    on_twin = {key("kubeconfig"): str(twin.paths.kubeconfig), key("prometheus_url"): twin.prometheus_url,
               key("ledger_dir"): str(twin.paths.root / "ledger")}
    for configuration in (experiment.data.setdefault("configuration", {}), experiment.config_vars):
        configuration.pop(key("context"), None)
        configuration.update(on_twin)


def cmd_rehearse(args: argparse.Namespace) -> int:
    from chaos.rehearsal import month, rates, recoveries
    from probes import slo

    problems: list[str] = []
    try:
        horizon = slo.seconds(args.horizon) / 86_400
    except KilocardError as exc:
        problems.append(f"--horizon: {exc}")
    try:
        classes = rates.adjusted(rates.DEFAULTS, args.rate)
    except SpecError as exc:
        problems.append(str(exc))
    try:
        measured = recoveries.Recoveries.read(args.recoveries or recoveries.MEASURED).with_startup(args.startup)
    except SpecError as exc:
        problems.append(str(exc))
    snapshot, _figures, loads, missing, source = _fleet_now(args, problems)
    plan = month.Plan(horizon, args.seeds, args.crews, args.target, args.max_spares, not args.no_spares)
    found = month.rehearse(snapshot, loads, classes, measured, plan, args.namespace)
    found["inputs"]["no_load"] = missing
    if args.worst_hour and found["worst_hour"]:
        from chaos.rehearsal import replay

        timeline = replay.incident(found["worst_hour"], {c.name: c.effect for c in classes},
                                   {f"{ns}/{m}": v.slo_seconds for (ns, m), v in loads.items()}, args.compress)
        if timeline["faults"]:
            args.worst_hour.write_text(yaml.safe_dump(timeline, sort_keys=False))
            print(f"worst hour {args.worst_hour}: kilocard replay {args.worst_hour}", file=sys.stderr)
        else:
            print("worst hour: no failure began in it (its breaches came from earlier ones): nothing to replay",
                  file=sys.stderr)
    if args.page:
        from chaos.report import planning

        print(f"page {planning.rehearse_page(found, args.page)}", file=sys.stderr)
    if emit(found, args.output):
        return Exit.PASSED
    print(f"cluster: {source}")
    print("\n".join(month.text(found)))
    return Exit.PASSED


def cmd_discover(args: argparse.Namespace) -> int:
    from chaos import serving
    from chaos.kube import Kube
    from chaos.vocabulary import local_testbed_kubeconfig

    kube = Kube.connect(args.kubeconfig, args.context, fallback=local_testbed_kubeconfig())
    try:
        pods = kube.list_pods_raw(args.namespace)
    finally:
        kube.close()
    live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    found = serving.models(serving.identify_all(live), {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                                                        for p in live})
    if emit(found, args.output):
        return Exit.PASSED
    print(f"cluster: {kube.source}")
    if not found:
        print(f"no model found in {'namespace ' + args.namespace if args.namespace else 'any namespace'}: no pod "
              "carries kilocard.io/model or a serving stack's labels, or runs vLLM or SGLang")
    for m in found:
        sized = "  ".join(f"{key.upper() if key != 'engine' else key} {m[key]['value']} ({m[key]['source']})"
                          for key in ("engine", "tp", "pp") if m[key])
        print(f"{m['namespace']}/{m['model']}  [{m['stack']}: {', '.join(m['workloads'])}]  {sized}")
        print(f"  model from {'; '.join(m['sources']['model'])}; replica from {'; '.join(m['sources']['replica'])}; "
              f"rank from {'; '.join(m['sources']['rank'])}")
        for r in m["replicas"]:
            whole = f"{len(r['pods'])} of {r['size']} pods" if r["size"] else f"{len(r['pods'])} pod(s)"
            pods_said = ", ".join(f"{p['pod']} rank {p['rank']} on {p['node'] or '(unscheduled)'}"
                                  f"{'' if p['ready'] else ' not Ready'}" for p in r["pods"])
            print(f"  replica {r['replica']}: {whole}: {pods_said}")
    return Exit.PASSED


def cmd_recover(args: argparse.Namespace) -> int:
    from chaos import revert

    run_id = ledger.check_run_id(args.run) if args.run else None
    ctx = _context(args, run_id or "recover")
    try:
        if args.dry_run:
            found = revert.pending(ctx, args.ledger_dir, run_id, args.expired_only)
        else:
            reverted, left = revert.recover(ctx, args.ledger_dir, run_id, args.expired_only)
    finally:
        ctx.kube.close()
    if args.dry_run:
        if not emit([asdict(r) for r in found], args.output):
            for r in found:
                print(f"would revert {r.run_id} {r.kind} {describe_target(r.target)} (expires {r.expires_at})")
            if not found:
                print("nothing to recover")
        return Exit.PASSED
    if emit({"reverted": [asdict(r) for r in reverted], "left": [asdict(r) for r in left]}, args.output):
        return Exit.REVERT_INCOMPLETE if left else Exit.PASSED
    for r in reverted:
        print(f"reverted {r.run_id} {r.kind} {describe_target(r.target)}")
    for r in left:
        print(f"kilocard: still open: {r.run_id} {r.kind} {describe_target(r.target)}: {r.error}", file=sys.stderr)
    if not reverted and not left:
        print("nothing to recover")
    return Exit.REVERT_INCOMPLETE if left else Exit.PASSED


# The third-party modules of the extras (pyproject.toml), and which extra brings each.
EXTRAS = {"matplotlib": "report", "prometheus_client": "testbed", "cryptography": "testbed", "simpy": "plan"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["help"] and len(argv) > 1:  # kilocard help gameday run = kilocard gameday run --help
        argv = [*argv[1:], "--help"]
    try:
        parser = build_parser(with_testbed=bool(argv) and argv[0] == "testbed")
        if not argv or argv == ["help"]:  # as kubectl and helm: what there is to do
            parser.print_help()
            return Exit.PASSED if argv else Exit.INVALID
        args = parser.parse_args(argv)
        if failpoints.PROBLEM:
            raise SpecError(failpoints.PROBLEM)
        return int(args.handler(args) or 0)
    except KilocardError as exc:
        print(f"kilocard: {exc}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        print("kilocard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of its output went away (| head): no traceback, as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # Only a path the user gave (or one made from it) can be too long to look up.
        name = str(exc.filename or "")
        print(f"kilocard: {name[:120]}{'...' if len(name) > 120 else ''}: a path too long to look up "
              f"({len(name)} characters)", file=sys.stderr)
        return Exit.INVALID
    except ModuleNotFoundError as exc:  # an install without the extra this command needs
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"kilocard: {' '.join(argv[:1])} needs {exc.name}, which comes with kilocard's [{extra}] extra: "
              f"pip install 'kilocard[{extra}]'", file=sys.stderr)
        return Exit.INVALID


if __name__ == "__main__":
    sys.exit(main())
