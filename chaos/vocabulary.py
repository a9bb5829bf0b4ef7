"""The names the toolkit, the probes, the testbed and the fleet simulator share: labels,
annotations and taints, how a pod's TP group and rank are read, and readiness. Pure data and
pure functions over the API's plain JSON (and how a thread kilocard starts treats signals);
nothing here talks to a cluster.

`probes` reach `chaos` only through this module (an import-linter contract), so a probe never
depends on how faults are applied.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import re
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chaos.errors import SpecError

# The shipped catalog of experiments (S1-S14, game days, incidents); in a checkout, a link to experiments/.
CATALOG = (Path(__file__).parent / "catalog").resolve()
EXPERIMENT_SUFFIXES = (".yaml", ".yml", ".json")  # what an experiment file (and a folder's) may be called

# Time zero, as the contracts say it (chaos.timezero decides it): a budget never starts after a
# disruption it times.
FIRST_DISRUPTION = ("the run's first disruption: the earliest of its first fault (ledger) and the end of the "
                    "first action of another driver before the probe (what such an action touched is not known, "
                    "so each counts), else `since`")
LAST_DISRUPTION = ("the run's last disruption: the latest of its last fault (ledger) and the end of the last "
                   "action of another driver before the probe, else `since`")

# --- the inference fleet --------------------------------------------------------------------
MODEL_LABEL = "kilocard.io/model"
RACK_LABEL = "kilocard.io/rack"  # the testbed's rack of a node; a report groups nodes by it
ENGINE_LABEL = "kilocard.io/engine"  # vllm (default) | sglang: which metric names a replica exports
TP_SIZE_LABEL = "kilocard.io/tp-size"
GROUP_SIZE_LABEL = "kilocard.io/group-size"  # pods in one multi-node TP group
# A TP group: kilocard's own label, else LeaderWorkerSet's group key. A rank: LWS's worker index,
# else the StatefulSet pod index (an LWS leader's pod index is its group's index, not its rank:
# lws pkg/controllers/leaderworkerset_controller.go). A pod with neither is a group of its own, rank 0.
GROUP_LABELS = ("kilocard.io/tp-group", "leaderworkerset.sigs.k8s.io/group-key")
RANK_LABELS = ("leaderworkerset.sigs.k8s.io/worker-index", "apps.kubernetes.io/pod-index")
SHAPE_LABELS = ("kilocard.io/layers", "kilocard.io/kv-heads", "kilocard.io/head-dim", "kilocard.io/dtype")
# The physics the capacity probes judge by and the fleet simulator serves by, one figure for both:
# bytes per element of a KV-cache dtype (the shape label kilocard.io/dtype), and the KV cache an
# 80 GB card holds after weights and activations (a parameter everywhere it is used).
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "fp8": 1, "int8": 1, "int4": 0.5}
KV_BYTES_PER_CARD = 40 * 2**30

# Extended resources whose name says "accelerator" win when a node offers several (RDMA, say).
_ACCELERATOR_WORDS = re.compile(r"gpu|npu|ascend|mlu|dcu|xpu|tpu|gaudi|neuron", re.IGNORECASE)


def card_resource_of(nodes: Iterable[dict[str, Any]]) -> str:
    """The cluster's card resource, from its nodes' capacity (plain JSON): the extended resource
    (`<domain>/<name>`, not a kubernetes.io one) that nodes offer, preferring accelerator names,
    then the one most nodes have. "" when no node offers one. Vendor-neutral on purpose: the
    same probes judge NVIDIA, AMD and Ascend fleets without being told which."""
    counts: dict[str, int] = {}
    for node in nodes:
        for name, quantity in ((node.get("status") or {}).get("capacity") or {}).items():
            domain = name.split("/", 1)[0] if "/" in name else ""
            if domain and not domain.endswith("kubernetes.io") and str(quantity) not in ("0", ""):
                counts[name] = counts.get(name, 0) + 1
    if not counts:
        return ""
    return min(counts, key=lambda r: (not _ACCELERATOR_WORDS.search(r), -counts[r], r))


# --- what kilocard places on the cluster ---------------------------------------------------
ISOLATION_TAINT = "kilocard.io/isolated"
DRA_DRIVER = "gpu.nvidia.com"  # the DRA driver a card is allocated by, unless told (NVIDIA's)
ISOLATION_ANNOTATION = "kilocard.io/isolation"  # JSON: which faults hold the node, what kilocard placed
# Non-graceful node shutdown: PodGC force-deletes the pods stuck on a dead node carrying this taint.
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
OUT_OF_SERVICE_ANNOTATION = "kilocard.io/out-of-service"  # as ISOLATION_ANNOTATION, for that taint
AGENT_ENDPOINT_ANNOTATION = "kilocard.io/agent-endpoint"
FAULT_LABEL = "kilocard.io/fault"  # on objects a fault creates (NetworkPolicy), value: the run id
RUN_LABEL = "kilocard.io/run-id"
# A namespace opts in to chaos with this label set to "enabled": the guards refuse a run that
# would end or displace pods anywhere else.
CHAOS_OPT_IN_LABEL = "kilocard.io/chaos"
LEDGER_LABEL = "kilocard.io/ledger"
SYSTEM_NAMESPACE = "kilocard-system"

# --- quarantine by a remediator (NVIDIA NVSentinel's names) ----------------------------------
QUARANTINE_TAINTS = ("nvidia.com/gpu-error",)
QUARANTINE_LABELS = ("dgxc.nvidia.com/nvsentinel-state",)
STATE_LABEL = QUARANTINE_LABELS[0]
# The states in which NVSentinel holds a node cordoned (it uncordons on remediation-succeeded).
HOLDING_STATES = ("quarantined", "draining", "drain-succeeded", "drain-failed", "remediating",
                  "remediation-failed")


def cordon_held_by_other(labels: dict[str, str], taint_keys: list[str]) -> str | None:
    """Who else, known by its markers, holds this node cordoned (None: nobody we know of)."""
    if labels.get(STATE_LABEL) in HOLDING_STATES:
        return f"{STATE_LABEL}={labels[STATE_LABEL]}"
    return next((t for t in taint_keys if t in QUARANTINE_TAINTS), None)



def loopback(host: str) -> bool:
    """Whether `host` (a name, an address or a bracketed IPv6 literal) never leaves this machine:
    the one place a bearer token may travel in cleartext."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def clipped(text: str, width: int = 60) -> str:
    """A value as a message shows it: a path thousands of characters long cut to its start."""
    return text if len(text) <= width else text[:width - 3] + "..."


def state_path(variable: str, folder: str) -> Path:
    """Where kilocard keeps state of its own: $VARIABLE, else ~/.local/state/kilocard/FOLDER. A path
    the system cannot use (a name too long, $HOME not a path) is the environment's mistake, said
    as input before it is used, not a traceback from deep inside a run."""
    value = os.environ.get(variable, "")
    said = f"${variable}" if value else "$HOME"
    try:
        path = Path(value) if value else Path.home() / ".local" / "state" / "kilocard" / folder
        path.exists()  # raises only for a path the system cannot look up: too long, a loop
    except (RuntimeError, OSError) as exc:
        reason = (getattr(exc, "strerror", None) or str(exc)).rstrip(".").lower()
        shown = clipped(os.environ.get(variable) or os.environ.get("HOME", ""))
        raise SpecError(f"{said}={shown!r}: {reason} (kilocard keeps its {folder} there; "
                        f"set {said} to a folder it can use)") from None
    return path


def local_testbed_state() -> Path:
    """Where the local testbed keeps its state ($KILOCARD_STATE, else ~/.local/state/kilocard/testbed)."""
    return state_path("KILOCARD_STATE", "testbed")


# The local testbed's first port (its apiserver's): $KILOCARD_PORT_BASE, else 6443. A running
# testbed's own, from its state, wins: one started with `--port-base` is still the local testbed.
PORT_BASE_VARIABLE = "KILOCARD_PORT_BASE"
DEFAULT_PORT_BASE = 6443


def local_testbed_port_base() -> int:
    """The local testbed's port base: the running one's (its state.json), else the configured one."""
    try:
        return int(json.loads((local_testbed_state() / "state.json").read_text())["config"]["port_base"])
    except (OSError, ValueError, KeyError, TypeError):
        return configured_port_base()


def configured_port_base() -> int:
    """$KILOCARD_PORT_BASE, else 6443: where a local testbed starts its ports."""
    given = os.environ.get(PORT_BASE_VARIABLE, "")
    if not given:
        return DEFAULT_PORT_BASE
    if not given.isdigit() or not 1024 <= int(given) <= 65535 - 16:
        raise SpecError(f"${PORT_BASE_VARIABLE}={clipped(given)!r}: expected a port from 1024 to {65535 - 16} "
                        "(the local testbed's first port)")
    return int(given)


def local_testbed_prometheus() -> str:
    """The local testbed's Prometheus (port base + 7): what probes and stop conditions ask when no
    kilocard_prometheus_url is configured."""
    return f"http://127.0.0.1:{local_testbed_port_base() + 7}"


def local_testbed_openai() -> str:
    """The local testbed's fleet simulator (port base + 6), whose replicas answer an
    OpenAI-compatible API: where built-in load (chaos.load) is sent when no url is given."""
    return f"http://127.0.0.1:{local_testbed_port_base() + 6}"


def local_testbed_kubeconfig() -> Path | None:
    """The running local testbed's kubeconfig: the toolkit's embedded default cluster, found
    without importing the testbed (its state.json exists only while it runs)."""
    state = local_testbed_state()
    kubeconfig = state / "kubeconfig"
    return kubeconfig if (state / "state.json").is_file() and kubeconfig.is_file() else None


def natural_key(name: str) -> list[tuple[int, int | str]]:
    """A name's sort key with its numbers as numbers (s2 before s10, vllm-2 before vllm-10)."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part]


def group_of(namespace: str, name: str, labels: dict[str, str]) -> tuple[str, int]:
    """(TP group key, rank): a labelled group, else the pod alone (rank 0)."""
    group = next((labels[k] for k in GROUP_LABELS if labels.get(k)), None)
    rank = next((int(labels[k]) for k in RANK_LABELS if str(labels.get(k, "")).isdigit()), 0)
    return f"{namespace}/{group or name}", rank


def ready(obj: dict[str, Any]) -> bool:
    """A pod or node (plain JSON) with condition Ready=True; a terminating pod is not Ready."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def epoch(value: str | None) -> float | None:
    """An API or journal time as epoch seconds: RFC 3339 with "Z" (the API's whole seconds, the
    ledger's) or an offset and microseconds (chaoslib's, events.k8s.io's eventTime)."""
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def cluster_line(target: dict[str, str]) -> str:
    """Which cluster a run ran against (chaos.kube.Kube.target), in a line: where the connection
    came from, its context and its server."""
    context = f", context {target['context']}" if target.get("context") else ""
    return f"{target.get('source', '?')}{context}, {target.get('server', '?')}"


def quiet_thread() -> None:
    """Leave Ctrl-C and SIGTERM to the main thread (call it first thing in a thread kilocard
    starts): a signal the kernel hands to another thread does not wake a main thread blocked in a
    wait, so the stop it asks for would come late, or only when the wait ends."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def selects(selector: str | None, labels: dict[str, str]) -> bool:
    """Does a label selector (the API's text form: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
    `k notin (a,b)`, comma-joined) select these labels? For filtering objects already in memory
    the way the apiserver would."""
    for term in _terms(selector or ""):
        if " in " in term or " notin " in term:
            key, op, values = term.partition(" notin ") if " notin " in term else term.partition(" in ")
            wanted = {v.strip() for v in values.strip().removeprefix("(").removesuffix(")").split(",")}
            if (labels.get(key.strip()) in wanted) != (op == " in "):
                return False
        elif "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, _, value = term.replace("==", "=").partition("=")
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _terms(selector: str) -> list[str]:
    """A selector's comma-joined terms (a comma inside a set's parentheses is not a join)."""
    terms, depth, current = [], 0, ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += ch
    return [t for t in [*terms, current.strip()] if t]


def describe_target(target: Mapping[str, Any]) -> str:
    """A fault's target in a line, as every listing prints it (the report, `kilocard fault` and
    `recover`, a fault's problems): a pod as namespace/name, a node with its card(s), interface or
    pod; a namespace's pods by their selector; else its JSON."""
    if target.get("name"):
        return f"{target.get('namespace', '')}/{target['name']}".lstrip("/")
    if target.get("pod_selector") is not None:
        return f"{target.get('namespace', '')} pods {target['pod_selector'] or '(all)'}".strip()
    parts = [str(target[k]) for k in ("node", "interface", "netns", "pod_uid") if target.get(k)]
    for key in ("card", "cards"):
        if target.get(key) is not None:
            parts.append(f"{key} {target[key]}")
    return " ".join(parts) or json.dumps(dict(target), sort_keys=True)
