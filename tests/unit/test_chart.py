"""kilocard's Helm chart (deploy/chart/kilocard), linted and rendered by the real helm (built from
its Go module the first time a test needs it, or by `kilocard testbed build --all`). Its RBAC, agent and reaper are
the same files deploy/kustomization.yaml installs, so the two installs cannot drift; the rendered
objects are those files with the chart's labels and the chosen image."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

import chaos
from chaos.gameday import cronjob
from tests.chart import CHART, NAMESPACE, helm, rendered


def by_kind(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}


def files(*names: str) -> list[dict[str, Any]]:
    return [o for name in names for o in yaml.safe_load_all((CHART / "files" / name).read_text()) if o]


def without_chart(o: dict[str, Any]) -> dict[str, Any]:
    """The object less what the chart adds: its labels, the image and its pull policy."""
    o = yaml.safe_load(yaml.safe_dump(o))
    labels = {k: v for k, v in (o["metadata"].get("labels") or {}).items()
              if not k.startswith(("helm.sh/", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
                                   "app.kubernetes.io/part-of", "app.kubernetes.io/version"))}
    o["metadata"].pop("labels", None)
    if labels:
        o["metadata"]["labels"] = labels
    pod = (o.get("spec", {}).get("template") or o.get("spec", {}).get("jobTemplate", {}).get("spec", {})
           .get("template") or {}).get("spec")
    for container in (pod or {}).get("containers", []):
        container["image"] = container["image"].rpartition("/")[2].partition(":")[0]  # the name, as the files have it
        container.pop("imagePullPolicy", None)
    return o


def test_the_chart_lints_strictly_and_is_kilocards_version():
    done = helm("lint", "--strict", "--namespace", NAMESPACE, str(CHART))
    assert done.returncode == 0 and "0 chart(s) failed" in done.stdout, done.stdout + done.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == chaos.__version__


def test_the_default_install_is_the_kustomize_install_with_the_charts_labels_and_image():
    objects = rendered()
    assert sorted(o["kind"] for o in objects) == sorted(
        ["ServiceAccount"] * 2 + ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] * 2
        + ["DaemonSet", "CronJob"])
    same = files("rbac-runner.yaml", "rbac-reaper.yaml", "agent-daemonset.yaml", "reaper-cronjob.yaml")
    assert by_kind([without_chart(o) for o in objects]) == by_kind(same)
    for o in objects:
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", o["metadata"]
    images = {o["kind"]: c["image"] for o in objects if o["kind"] in ("DaemonSet", "CronJob")
              for c in (o["spec"].get("template") or o["spec"]["jobTemplate"]["spec"]["template"])["spec"]["containers"]}
    assert images == {"CronJob": f"ghcr.io/kilocard/kilocard:{chaos.__version__}",
                      "DaemonSet": f"ghcr.io/kilocard/kilocard-agent:{chaos.__version__}"}


def test_the_runners_rules_are_the_ones_a_scheduled_game_day_grants():
    (role,) = [o for o in rendered() if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "kilocard-runner"]
    assert [dict(r) for r in role["rules"]] == [dict(r) for r in cronjob.RUNNER_CLUSTER_RULES]


def test_any_other_namespace_is_refused_with_the_reason():
    done = helm("template", "kilocard", str(CHART), "--namespace", "chaos")
    assert done.returncode != 0
    assert "kilocard installs into the namespace kilocard-system" in done.stderr and "not chaos" in done.stderr


def test_the_ascend_values_add_mindx_dls_rights_in_its_namespaces_only():
    plain = by_kind(rendered())
    ascend = by_kind(rendered("ascend.enabled=true"))
    added = {k: v for k, v in ascend.items() if k not in plain}
    assert sorted(added) == [("Role", "kube-system", "kilocard-npu"), ("Role", "mindx-dl", "kilocard-npu"),
                             ("RoleBinding", "kube-system", "kilocard-npu"), ("RoleBinding", "mindx-dl", "kilocard-npu")]
    assert by_kind([without_chart(o) for o in added.values()]) == by_kind(files("ascend/rbac.yaml"))


def test_the_agent_takes_its_allowlist_interface_and_nodes_and_can_be_left_out():
    (agent,) = [o for o in rendered("agent.allow=tc-delay\\,kubelet-stop", "agent.interface=bond0",
                                    "agent.nodeSelector.gpu=a100", "image.tag=9.9.9") if o["kind"] == "DaemonSet"]
    pod = agent["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--interface") + 1] == "bond0" and args[-2:] == ["--allow", "tc-delay,kubelet-stop"]
    assert pod["nodeSelector"] == {"gpu": "a100"} and pod["containers"][0]["image"].endswith(":9.9.9")
    assert pod["automountServiceAccountToken"] is False
    (own,) = [o for o in rendered("agent.image=registry.example/kilocard-agent:1") if o["kind"] == "DaemonSet"]
    assert own["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/kilocard-agent:1"
    kinds = {o["kind"] for o in rendered("agent.enabled=false", "reaper.enabled=false")}
    assert "DaemonSet" not in kinds and "CronJob" not in kinds


def test_a_run_and_a_game_day_run_as_the_runner_on_a_read_only_root_with_the_prometheus_settings():
    objects = rendered(values={
        "run": {"enabled": True, "configMap": "exps", "experiments": ["s1.yaml", "s2.yaml"],
                "vars": ["namespace=serving"]},
        "gamedays": [{"name": "weekly", "schedule": "0 10 * * 3", "timeZone": "Asia/Shanghai",
                      "configMap": "weekly-plan", "plan": "plan.yaml"}],
        "prometheus": {"url": "https://prometheus.monitoring:9090", "podLabel": "exported_pod"}})
    found = by_kind(objects)
    job = found[("Job", NAMESPACE, "kilocard-run-1")]["spec"]["template"]["spec"]
    game = found[("CronJob", NAMESPACE, "kilocard-gameday-weekly")]
    assert game["spec"]["timeZone"] == "Asia/Shanghai" and game["spec"]["concurrencyPolicy"] == "Forbid"
    gameday = game["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    settings = ["--var", "kilocard_prometheus_url=https://prometheus.monitoring:9090",
                "--var", "kilocard_prometheus_pod_label=exported_pod"]
    written = ["--journal", "/reports", "--reports", "/reports", "--ledger-dir", "/reports/ledger"]
    assert job["containers"][0]["command"] == ["kilocard", "run", "/experiments/s1.yaml", "/experiments/s2.yaml",
                                               "--var", "namespace=serving", *written, *settings]
    assert gameday["containers"][0]["command"] == ["kilocard", "gameday", "run", "/experiments/plan.yaml", *written,
                                                   *settings]
    for pod, config_map in ((job, "exps"), (gameday, "weekly-plan")):
        assert pod["serviceAccountName"] == "kilocard-runner" and pod["securityContext"]["runAsNonRoot"] is True
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "experiments", "configMap": {"name": config_map}} in pod["volumes"]


@pytest.mark.parametrize(("values", "said"), [
    ({"run": {"enabled": True}}, "run.enabled needs run.configMap"),
    ({"gamedays": [{"name": "weekly", "schedule": "0 10 * * 3"}]}, "each of gamedays needs name, schedule, configMap"),
])
def test_values_that_cannot_run_are_refused_at_render_time(tmp_path, values, said):
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    done = helm("template", "kilocard", str(CHART), "--namespace", NAMESPACE, "-f", str(tmp_path / "values.yaml"))
    assert done.returncode != 0 and said in done.stderr, done.stderr
