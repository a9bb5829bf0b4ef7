from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chaos.kube import Kube, pod_ready


def ready_pods(kube: Kube, namespace: str, model: str) -> list[Any]:
    return [p for p in kube.list_pods(namespace, f"kilocard.io/model={model}").items if pod_ready(p)]


def wait_ready(kube: Kube, namespace: str, model: str, count: int, timeout: float = 60) -> list[Any]:
    """Block (on a watch) until exactly `count` pods of `model` are Ready; return them."""
    pods = kube.wait_until(
        "pods", lambda items: sum(pod_ready(p) for p in items) == count, timeout=timeout,
        namespace=namespace, label_selector=f"kilocard.io/model={model}")
    return [p for p in pods if pod_ready(p)]


def per_node(pods: list[Any]) -> Counter[str]:
    return Counter(p.spec.node_name for p in pods)


def workload(objects: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The Deployment of `model` among fleet manifests."""
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == model)


def agent(kube: Kube, node: str) -> tuple[str, str]:
    """A node's agent endpoint (from its annotation) and the bearer token (from the Secret)."""
    endpoint = kube.read_node(node).metadata.annotations["kilocard.io/agent-endpoint"]
    token = kube.read_secret("kilocard-system", "kilocard-agent-token")["token"].decode()
    return endpoint, token


def agent_call(kube: Kube, node: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    endpoint, token = agent(kube, node)
    request = urllib.request.Request(f"{endpoint}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def query(prom: Any, promql: str, by: str | None = None) -> dict[str, float]:
    """Instant query -> {value of label `by` (or "value" when None): sample value}; NaN dropped."""
    out = {}
    for sample in prom.custom_query(promql):
        value = float(sample["value"][1])
        if value == value:
            out[sample["metric"][by] if by else "value"] = value
    return out


def eventually(check: Any, timeout: float, interval: float = 1.0) -> Any:
    """Re-evaluate a Prometheus-backed check (metrics have no watch) until it returns truthy."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(interval)


def markers(kube: Kube, run_id: str) -> list[Any]:
    """The run's in-cluster ledger markers."""
    return kube.list_config_maps("kilocard-system", f"kilocard.io/run-id={run_id}")


def run_cli(testbed: Any, ledger_dir: Any, *args: str) -> subprocess.Popen[str]:
    """`kilocard ...` as a separate runner process against the test testbed."""
    env = {**os.environ, "KUBECONFIG": str(testbed.paths.kubeconfig), "KILOCARD_LEDGER": str(ledger_dir)}
    return subprocess.Popen([sys.executable, "-m", "chaos.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_applied(proc: subprocess.Popen[str], count: int) -> list[str]:
    """Read the runner's output until `count` faults say they are applied (and how they landed)."""
    lines: list[str] = []
    while len([x for x in lines if x.split("; landed: ")[0].endswith(": applied")]) < count:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, f"runner ended early: {proc.stderr.read() if proc.stderr else ''}"
        lines.append(line.strip())
    return lines


def service_account_kubeconfig(tb: Any, kube: Kube, namespace: str, name: str, path: Any) -> Any:
    """A kubeconfig holding a TokenRequest token of a ServiceAccount, as its pod would authenticate
    (not system:masters, so RBAC and the apiserver's request limits apply to it)."""
    import yaml  # noqa: PLC0415 - only the callers that need a token pay for it

    token = kube.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    config = yaml.safe_load(tb.paths.kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    config["contexts"] = [{"name": name, "context": {"cluster": config["clusters"][0]["name"], "user": name}}]
    config["current-context"] = name
    path.write_text(yaml.safe_dump(config))
    return path


def differences(before: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What differs between two fingerprints of a cluster, a node's fields named one by one."""
    diff = {}
    for k in before.keys() | now.keys():
        was, is_ = before.get(k), now.get(k)
        if isinstance(was, dict) and isinstance(is_, dict):
            diff.update({f"{k}.{f}": (was.get(f), is_.get(f)) for f in was.keys() | is_.keys()
                         if was.get(f) != is_.get(f)})
        elif was != is_:
            diff[k] = (was, is_)
    return diff


def settled(fingerprint: Callable[[], dict[str, Any]], before: dict[str, Any],
            timeout: float) -> dict[str, tuple[Any, Any]]:
    """Wait for the cluster to come back to `before` (controllers catch up, replacements start, a
    stopped kubelet comes back); return what still differs at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        diff = differences(before, fingerprint())
        if not diff or time.monotonic() > deadline:
            return diff
        time.sleep(0.5)


def steady(fingerprint: Callable[[], dict[str, Any]], timeout: float = 30, interval: float = 2) -> dict[str, Any]:
    """The fingerprint once it stops changing: a new node is still being labelled and annotated
    (kwok, the simulator, the controller manager), a revert's effects still landing."""
    previous, deadline = None, time.monotonic() + timeout
    while (now := fingerprint()) != previous and time.monotonic() < deadline:
        previous = now
        time.sleep(interval)
    return now


DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CHART_FILES = DEPLOY / "chart" / "kilocard" / "files"  # the manifests kustomize and the chart both install


def apply_deploy(kube: Kube, *names: str) -> None:
    """Apply manifests of deploy/ (the namespace) or the chart's files (an RBAC file) as `kubectl
    apply -f` would."""
    import yaml  # noqa: PLC0415 - as above

    for name in names:
        path = DEPLOY / name if (DEPLOY / name).is_file() else CHART_FILES / name
        for doc in yaml.safe_load_all(path.read_text()):
            kube.apply(doc)


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def install_chart(kube: Kube, *sets: str, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """kilocard's chart as `helm install` would put it on the testbed: its rights for real, its
    workloads (agent DaemonSet, CronJobs, a run's Job) admitted by the apiserver and not stored
    (server dry-run: the testbed's nodes cannot run their images). Returns what was rendered."""
    from tests.chart import rendered  # noqa: PLC0415 - only the chart's tests pay for helm

    apply_deploy(kube, "namespace.yaml")
    objects = rendered(*sets, values=values)
    for o in objects:
        kube.apply(o, dry_run=o["kind"] not in RBAC_KINDS)
    return objects


def deploy(kube: Kube, p: Any, models: dict[str, int]) -> None:
    """`models` (replicas each) on pool `p`, on the default timing the catalog assumes, serving at
    their steady state (testbed.steady)."""
    from testbed import fleet, timing

    objects = timing.stamp(p.fleet(*models, replicas=models), "default")
    fleet.deploy(kube, objects, timeout=90, say=lambda _m: None, prometheus=p.prometheus)


def controller_running(kind: Any, testbed: Any, kube: Any) -> Iterator[Any]:
    """A stack's real controller (testbed.controllers) for the life of a fixture."""
    running = kind(testbed, kube).start()
    yield running
    running.stop()


def first_fault(journal: dict[str, Any]) -> str:
    """How a reason names the run's first fault, its budget's time zero (chaos.timezero)."""
    from chaos.vocabulary import describe_target

    f = min(journal["kilocard"]["faults"], key=lambda f: f["applied_at"])
    return f"the run's first fault ({f['kind']} on {describe_target(f['target'])})"
