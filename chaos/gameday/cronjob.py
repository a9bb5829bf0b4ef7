"""A game day on a schedule: the manifests of a CronJob that runs a plan unattended in the cluster.

    ServiceAccount       <name>, its token mounted (the runner acts in-cluster)
    ClusterRole(+Binding) <namespace>:<name>, the runner's rules (the chart's files/rbac-runner.yaml ClusterRole)
    Role(+Binding)       <namespace>:<name> in kilocard-system: the runner's ledger and agent token (its Role)
    Role(+Binding)       <name> in the game day's namespace: get/watch on its gates' and control's
                         ConfigMaps by name (patch too for a gate: it marks itself waiting); with
                         storage=configmap, create, and patch by name, of its summary ConfigMap
    ConfigMap            <name>-plan: the plan and every experiment it names, each under a valid key,
                         the plan rewritten to name them by key; mounted read-only at /plan
    PersistentVolumeClaim <name>-reports, mounted at /reports (storage=pvc); else an emptyDir there
                         and the summary goes to ConfigMap <name>-summary
    CronJob              <name>: `kilocard gameday run /plan/<plan key>`, Forbid, backoffLimit 0

A scheduled game day has no one at a terminal, reads ConfigMaps only in its own namespace, and
must start inside its window: a plan or schedule that breaks any of this is refused with every
problem at once. The schedule is read in the window's time zone (the CronJob's timeZone), else in
the controller manager's (UTC on most clusters).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from chaos import __version__
from chaos.errors import SpecError
from chaos.gameday import cron as crons
from chaos.gameday._check import Problems
from chaos.gameday.plan import ApproveStep, ConfigMapRef, ExperimentStep, Plan
from chaos.vocabulary import SYSTEM_NAMESPACE

Manifest = dict[str, Any]

DEFAULT_IMAGE = f"ghcr.io/kilocard/kilocard:{__version__}"
STORAGES = ("pvc", "configmap")
PLAN_DIR = "/plan"
REPORTS_DIR = "/reports"
MAX_CONFIG_MAP_BYTES = 1024 * 1024  # the apiserver refuses a larger object
MAX_CRONJOB_NAME = 52  # the controller appends an 11-character suffix to name each Job
USER = 10001  # the image's non-root user (images/build.py)
DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")  # outside what a ConfigMap key may hold

# The runner's rules, as deploy/chart/kilocard/files/rbac-runner.yaml grants them (a unit test keeps them equal).
RUNNER_CLUSTER_RULES: tuple[dict[str, list[str]], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
     "verbs": ["get", "list", "create", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"], "verbs": ["get", "create", "patch",
                                                                                   "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
)
RUNNER_SYSTEM_RULES: tuple[dict[str, list[str]], ...] = (  # in kilocard-system
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kilocard-agent-token"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
)


def schedule(plan: Plan, cron: str, *, image: str = DEFAULT_IMAGE, namespace: str = SYSTEM_NAMESPACE,
             storage: str = "pvc", name: str | None = None, variables: Sequence[str] = (),
             storage_size: str = "1Gi", storage_class: str | None = None, starting_deadline_seconds: int = 300,
             resources: dict[str, dict[str, str]] | None = None, now: datetime | None = None) -> list[Manifest]:
    """The manifests (see the module's doc) that run `plan` on `cron`. `variables`: --var strings
    for every experiment (kilocard_prometheus_url=... names the cluster's Prometheus); `now`: when
    the check that the schedule fires inside the window starts counting. Raises SpecError."""
    name = name or _default_name(plan)
    files, plan_key = _files(plan)
    parsed = _checked(plan, cron, files, storage, namespace, name, starting_deadline_seconds, now or datetime.now(UTC))
    summary = f"{name}-summary" if storage == "configmap" else None
    manifests = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, name, namespace)},
                 *_rbac(plan, name, namespace, summary),
                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, f"{name}-plan", namespace),
                  "data": files}]
    reports: dict[str, Any] = {"emptyDir": {}}
    if storage == "pvc":
        claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage_size}}}
        if storage_class:
            claim["storageClassName"] = storage_class
        manifests.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": _meta(name, f"{name}-reports", namespace), "spec": claim})
        reports = {"persistentVolumeClaim": {"claimName": f"{name}-reports"}}
    # Everything it writes goes under /reports: the root filesystem is read-only.
    command = ["kilocard", "gameday", "run", f"{PLAN_DIR}/{plan_key}", "--journal", REPORTS_DIR, "--reports",
               REPORTS_DIR, "--ledger-dir", f"{REPORTS_DIR}/ledger", *(a for v in variables for a in ("--var", v))]
    if summary:
        command += ["--summary-configmap", summary]
    spec: dict[str, Any] = {"schedule": parsed.text.strip()}
    if plan.window is not None and plan.window.zone is not None:
        spec["timeZone"] = plan.window.zone.key
    template = {"metadata": {"labels": _labels(name)},
                "spec": _pod(name, image, command, resources or DEFAULT_RESOURCES, reports)}
    spec.update(concurrencyPolicy="Forbid", startingDeadlineSeconds=starting_deadline_seconds,
                jobTemplate={"metadata": {"labels": _labels(name)},
                             "spec": {"backoffLimit": 0, "template": template}})
    manifests.append({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(name, name, namespace),
                      "spec": spec})
    return manifests


def _labels(gameday: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "kilocard", "app.kubernetes.io/component": "gameday",
            "kilocard.io/gameday": gameday}


def _meta(gameday: str, name: str, namespace: str | None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name}
    if namespace is not None:
        found["namespace"] = namespace
    return {**found, "labels": _labels(gameday)}


def _checked(plan: Plan, cron: str, files: dict[str, str], storage: str, namespace: str, name: str,
             starting_deadline_seconds: int, now: datetime) -> crons.Cron:
    """The parsed schedule, once every argument and the plan are fit for a CronJob; else a
    SpecError with every problem."""
    problems = Problems()
    parsed = _cron(cron, problems)
    if storage not in STORAGES:
        problems.add("--storage", f"expected one of {', '.join(STORAGES)}, got {storage!r}")
    if not _NAME.match(namespace) or len(namespace) > 63:
        problems.add("--namespace", f"expected a namespace name (lower-case letters, digits and '-', up to 63), "
                                    f"got {namespace!r}")
    if not _NAME.match(name) or len(name) > MAX_CRONJOB_NAME:
        problems.add("--name", f"expected a CronJob name (lower-case letters, digits and '-', up to "
                               f"{MAX_CRONJOB_NAME}), got {name!r}")
    if isinstance(starting_deadline_seconds, bool) or not isinstance(starting_deadline_seconds, int) \
            or starting_deadline_seconds < 1:
        problems.add("--starting-deadline", f"expected whole seconds from 1, got {starting_deadline_seconds!r}")
    _unattended(plan, namespace, problems)
    if parsed is not None:
        _fires_in_window(plan, parsed, now, problems)
    size = sum(len(text.encode()) for text in files.values())
    if size > MAX_CONFIG_MAP_BYTES:
        problems.add(str(plan.path), f"the plan and its experiments are {size} bytes: more than a ConfigMap holds "
                                     f"({MAX_CONFIG_MAP_BYTES})")
    if problems.lines or parsed is None:
        raise SpecError("\n".join(problems.lines))
    return parsed


def _rbac(plan: Plan, name: str, namespace: str, summary: str | None) -> list[Manifest]:
    """Roles and their bindings to the game day's ServiceAccount: the runner's, cluster-wide and in
    kilocard-system (named `<namespace>:<name>`, for where the game day lives), and its own."""
    account = {"kind": "ServiceAccount", "name": name, "namespace": namespace}

    def bound(role: str, role_name: str, rules: list[dict[str, Any]], where: str | None) -> list[Manifest]:
        return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": role, "metadata": _meta(name, role_name, where),
                 "rules": rules},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{role}Binding",
                 "metadata": _meta(name, role_name, where),
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": role_name},
                 "subjects": [account]}]

    qualified = f"{namespace}:{name}"
    found = [*bound("ClusterRole", qualified, copy.deepcopy(list(RUNNER_CLUSTER_RULES)), None),
             *bound("Role", qualified, copy.deepcopy(list(RUNNER_SYSTEM_RULES)), SYSTEM_NAMESPACE)]
    own = _own_rules(plan, summary)
    return found + (bound("Role", name, own, namespace) if own else [])


def _pod(name: str, image: str, command: list[str], resources: dict[str, dict[str, str]],
         reports: dict[str, Any]) -> dict[str, Any]:
    return {
        "serviceAccountName": name,
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 120,  # SIGTERM ends the running experiment; its revert needs time
        "securityContext": {"runAsNonRoot": True, "runAsUser": USER, "runAsGroup": USER, "fsGroup": USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "gameday", "image": image, "command": command,
            "env": [{"name": "HOME", "value": "/tmp"}],
            "resources": copy.deepcopy(resources),
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "plan", "mountPath": PLAN_DIR, "readOnly": True},
                             {"name": "reports", "mountPath": REPORTS_DIR},
                             {"name": "tmp", "mountPath": "/tmp"}],
        }],
        "volumes": [{"name": "plan", "configMap": {"name": f"{name}-plan"}},
                    {"name": "reports", **reports},
                    {"name": "tmp", "emptyDir": {}}],
    }


def _own_rules(plan: Plan, summary: str | None) -> list[dict[str, Any]]:
    """The game day's own rules in its namespace: its gates' ConfigMaps (get, watch, patch: a gate
    marks itself waiting), its control's (get, watch), its summary's (create; patch by name)."""
    gated = sorted({s.config_map.name for s in plan.steps if isinstance(s, ApproveStep) and s.config_map})
    watched = sorted({plan.control.name} - set(gated)) if plan.control else []
    rules: list[dict[str, Any]] = []
    for names, verbs in ((gated, ["get", "watch", "patch"]), (watched, ["get", "watch"])):
        if names:
            rules.append({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names, "verbs": verbs})
    if summary:
        # create cannot be limited by name (the object does not exist yet); patch can
        rules += [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [summary], "verbs": ["patch"]}]
    return rules


def dump(manifests: list[Manifest]) -> str:
    """The manifests as one multi-document YAML stream (`kubectl apply -f -`); files kept readable."""
    return yaml.dump_all(manifests, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def _default_name(plan: Plan) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", plan.path.stem.lower()).strip("-")
    return f"gameday-{slug}"[:MAX_CRONJOB_NAME].rstrip("-")


def _cron(text: str, problems: Problems) -> crons.Cron | None:
    try:
        return crons.parse(text)
    except SpecError as exc:
        problems.lines.append(str(exc))
        return None


def _unattended(plan: Plan, namespace: str, problems: Problems) -> None:
    """No terminal gates; ConfigMaps only in the game day's own namespace (its Role's)."""
    where = str(plan.path)

    def local(ref: ConfigMapRef, field: str) -> None:
        if ref.namespace != namespace:
            problems.add(f"{where}: {field}.namespace", f"a game day scheduled in {namespace} reads ConfigMaps "
                                                        f"there only, got {ref.namespace}")

    for step in plan.steps:
        if isinstance(step, ApproveStep) and step.via == "terminal":
            problems.add(f"{where}: steps[{step.index}].via", "terminal: a scheduled game day has no one at a "
                                                              "terminal; use via: configmap")
        if isinstance(step, ApproveStep) and step.config_map is not None:
            local(step.config_map, f"steps[{step.index}].configmap")
    if plan.control is not None:
        local(plan.control, "control")


def _fires_in_window(plan: Plan, cron: crons.Cron, now: datetime, problems: Problems) -> None:
    window = plan.window
    zone = window.zone if window is not None and window.zone is not None else UTC
    if cron.first(now, zone, window.is_open if window is not None else lambda _at: True) is None:
        inside = f" inside the window ({window.describe()})" if window is not None else ""
        problems.add("--cron", f"{cron.text!r} never fires{inside} in the next 400 days: the game day would never "
                               "start")


def _files(plan: Plan) -> tuple[dict[str, str], str]:
    """(ConfigMap data, the plan's key): each experiment under a key of its own (one per file),
    the plan rewritten to name them by key."""
    data = copy.deepcopy(plan.data)
    files: dict[str, str] = {}
    keys: dict[Path, str] = {}
    plan_key = _key(plan.path, set())
    for step in plan.steps:
        if isinstance(step, ExperimentStep):
            resolved = step.path.resolve()
            if resolved not in keys:
                keys[resolved] = _key(step.path, {plan_key, *files})
                files[keys[resolved]] = step.path.read_text()
            data["steps"][step.index]["experiment"] = keys[resolved]
    files[plan_key] = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return files, plan_key


def _key(path: Path, taken: set[str]) -> str:
    """A valid ConfigMap key from a file name (up to 253 of [-._a-zA-Z0-9]), unlike any in `taken`."""
    stem, suffix = _KEY_CHARS.sub("-", path.stem)[:200] or "file", _KEY_CHARS.sub("-", path.suffix)[:40]
    key, n = f"{stem}{suffix}", 2
    while key in taken:
        key, n = f"{stem}-{n}{suffix}", n + 1
    return key
