"""A game day on a schedule (chaos.gameday.cronjob): the manifests, their least privilege, the
plan and experiments packed into a ConfigMap, and what an unattended game day may not have."""

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from chaos import gameday
from chaos.errors import SpecError
from chaos.gameday import ExperimentStep, cronjob

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
MONDAY = datetime(2025, 6, 2, tzinfo=UTC)
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
WEEKDAYS = {"days": ["mon", "tue", "wed", "thu", "fri"], "from": "10:00", "to": "16:00", "timezone": "Asia/Shanghai"}


def plan(tmp_path, steps=None, **top):
    """A plan in its own folder naming the catalog's S1 twice, S8, and a copy of S1 from another
    folder under the same file name."""
    other = tmp_path / "other"
    other.mkdir(exist_ok=True)
    shutil.copy(EXPERIMENTS / "s1-kill-one-replica.yaml", other)
    folder = tmp_path / "plans"
    folder.mkdir(exist_ok=True)
    gates = {"namespace": "kilocard-system", "name": "gameday-gates"}
    steps = steps or [
        {"experiment": str(EXPERIMENTS / "s1-kill-one-replica.yaml")},
        {"pause": 10},
        {"approve": "on-call says go", "timeout": 600, "via": "configmap", "configmap": gates},
        {"experiment": "../other/s1-kill-one-replica.yaml", "vars": {"budget_seconds": 90}},
        {"experiment": str(EXPERIMENTS / "s8-fragile-placement.yaml")},
        {"experiment": str(EXPERIMENTS / "s1-kill-one-replica.yaml"), "name": "once more"},
    ]
    top = {"window": WEEKDAYS, "control": {"namespace": "kilocard-system", "name": "gameday-control"}, **top}
    path = folder / "Weekly Drill.yaml"
    path.write_text(yaml.safe_dump({"title": "weekly", **top, "steps": steps}))
    return gameday.load(path)


def by_kind(manifests, kind):
    return [m for m in manifests if m["kind"] == kind]


def deploy_rules(kind):
    documents = list(yaml.safe_load_all((ROOT / "deploy" / "chart" / "kilocard" / "files" / "rbac-runner.yaml").read_text()))
    return next(d for d in documents if d["kind"] == kind)["rules"]


def test_the_runners_rules_are_deploys():
    assert list(cronjob.RUNNER_CLUSTER_RULES) == deploy_rules("ClusterRole")
    assert list(cronjob.RUNNER_SYSTEM_RULES) == deploy_rules("Role")


def test_the_manifests_of_a_pvc_game_day(tmp_path):
    manifests = gameday.schedule(plan(tmp_path), "0 10 * * mon", now=MONDAY)
    assert [(m["kind"], m["metadata"]["name"], m["metadata"].get("namespace")) for m in manifests] == [
        ("ServiceAccount", "gameday-weekly-drill", "kilocard-system"),
        ("ClusterRole", "kilocard-system:gameday-weekly-drill", None),
        ("ClusterRoleBinding", "kilocard-system:gameday-weekly-drill", None),
        ("Role", "kilocard-system:gameday-weekly-drill", "kilocard-system"),
        ("RoleBinding", "kilocard-system:gameday-weekly-drill", "kilocard-system"),
        ("Role", "gameday-weekly-drill", "kilocard-system"),
        ("RoleBinding", "gameday-weekly-drill", "kilocard-system"),
        ("ConfigMap", "gameday-weekly-drill-plan", "kilocard-system"),
        ("PersistentVolumeClaim", "gameday-weekly-drill-reports", "kilocard-system"),
        ("CronJob", "gameday-weekly-drill", "kilocard-system"),
    ]
    cronjob = by_kind(manifests, "CronJob")[0]["spec"]
    assert cronjob["schedule"] == "0 10 * * mon" and cronjob["timeZone"] == "Asia/Shanghai"
    assert cronjob["concurrencyPolicy"] == "Forbid" and cronjob["startingDeadlineSeconds"] == 300
    job = cronjob["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == "gameday-weekly-drill"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/kilocard/kilocard:0.1.0"
    assert container["command"] == ["kilocard", "gameday", "run", "/plan/Weekly-Drill.yaml", "--journal", "/reports",
                                    "--reports", "/reports", "--ledger-dir", "/reports/ledger"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/plan"]["readOnly"] is True and "/reports" in mounts
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/plan"]["name"]]["configMap"] == {"name": "gameday-weekly-drill-plan"}
    assert volumes[mounts["/reports"]["name"]]["persistentVolumeClaim"] == {"claimName": "gameday-weekly-drill-reports"}
    claim = by_kind(manifests, "PersistentVolumeClaim")[0]["spec"]
    assert claim == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def test_rbac_is_the_runners_plus_exactly_the_configmaps_of_the_game_day(tmp_path):
    manifests = gameday.schedule(plan(tmp_path), "0 10 * * mon", now=MONDAY)
    cluster_role, system_role, own_role = (by_kind(manifests, "ClusterRole")[0], *by_kind(manifests, "Role"))
    assert cluster_role["rules"] == deploy_rules("ClusterRole")
    assert system_role["rules"] == deploy_rules("Role")
    assert own_role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["gameday-gates"],
         "verbs": ["get", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["gameday-control"],
         "verbs": ["get", "watch"]},
    ]
    account = {"kind": "ServiceAccount", "name": "gameday-weekly-drill", "namespace": "kilocard-system"}
    for binding in by_kind(manifests, "ClusterRoleBinding") + by_kind(manifests, "RoleBinding"):
        assert binding["subjects"] == [account]
        role = next(m for m in manifests if m["kind"] == binding["roleRef"]["kind"]
                    and m["metadata"]["name"] == binding["roleRef"]["name"]
                    and m["metadata"].get("namespace") == binding["metadata"].get("namespace"))
        assert role["metadata"].get("namespace") == binding["metadata"].get("namespace")


def test_with_configmap_storage_the_summary_goes_to_a_configmap(tmp_path):
    manifests = gameday.schedule(plan(tmp_path), "30 10 * * 1-5", storage="configmap", now=MONDAY,
                                 variables=["kilocard_prometheus_url=http://prometheus.monitoring:9090"])
    assert by_kind(manifests, "PersistentVolumeClaim") == []
    pod = by_kind(manifests, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {"name": "reports", "emptyDir": {}} in pod["volumes"]
    assert pod["containers"][0]["command"][-4:] == ["--var", "kilocard_prometheus_url=http://prometheus.monitoring:9090",
                                                    "--summary-configmap", "gameday-weekly-drill-summary"]
    own_role = by_kind(manifests, "Role")[1]
    assert own_role["rules"][2:] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["gameday-weekly-drill-summary"],
         "verbs": ["patch"]},
    ]


def test_a_plan_without_gates_or_control_gets_no_role_of_its_own(tmp_path):
    manifests = gameday.schedule(_bare(tmp_path), "@daily", now=MONDAY, namespace="team-a")
    assert [m["metadata"]["name"] for m in by_kind(manifests, "Role")] == ["team-a:gameday-bare"]
    assert by_kind(manifests, "Role")[0]["metadata"]["namespace"] == "kilocard-system"  # the ledger's namespace
    assert "timeZone" not in by_kind(manifests, "CronJob")[0]["spec"]


def _bare(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text(yaml.safe_dump({"title": "t", "steps": [{"experiment": str(EXPERIMENTS / "s1-kill-one-replica.yaml")}]}))
    return gameday.load(path)


def test_the_plan_and_its_experiments_are_packed_under_valid_keys(tmp_path):
    loaded = plan(tmp_path)
    data = by_kind(gameday.schedule(loaded, "0 10 * * mon", now=MONDAY), "ConfigMap")[0]["data"]
    assert sorted(data) == ["Weekly-Drill.yaml", "s1-kill-one-replica-2.yaml", "s1-kill-one-replica.yaml",
                            "s8-fragile-placement.yaml"]
    assert all(CONFIGMAP_KEY.match(key) for key in data)
    packed = yaml.safe_load(data["Weekly-Drill.yaml"])
    assert [s.get("experiment") for s in packed["steps"]] == [
        "s1-kill-one-replica.yaml", None, None, "s1-kill-one-replica-2.yaml", "s8-fragile-placement.yaml",
        "s1-kill-one-replica.yaml"]
    assert data["s8-fragile-placement.yaml"] == (EXPERIMENTS / "s8-fragile-placement.yaml").read_text()
    # Mounted as files in one folder, the packed plan loads as the original did.
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    for key, text in data.items():
        (mounted / key).write_text(text)
    again = gameday.load(mounted / "Weekly-Drill.yaml")
    assert [(s.kind, getattr(s, "variables", ())) for s in again.steps] == [
        (s.kind, getattr(s, "variables", ())) for s in loaded.steps]
    assert [s.path.read_text() for s in again.steps if isinstance(s, ExperimentStep)] == [
        s.path.read_text() for s in loaded.steps if isinstance(s, ExperimentStep)]
    assert again.window == loaded.window and again.control == loaded.control and again.steps[5].name == "once more"


def test_the_dump_reads_back_as_the_same_manifests(tmp_path):
    manifests = gameday.schedule(plan(tmp_path), "0 10 * * mon", storage="configmap", now=MONDAY)
    text = gameday.dump(manifests)
    assert list(yaml.safe_load_all(text)) == manifests
    assert text.count("\n---\n") == len(manifests) - 1
    assert "s8-fragile-placement.yaml: |" in text  # the files stay readable


def test_what_an_unattended_game_day_may_not_have_is_refused_all_at_once(tmp_path):
    loaded = plan(tmp_path, [
        {"approve": "go", "timeout": 60},
        {"approve": "go", "timeout": 60, "via": "configmap", "configmap": {"namespace": "team-a", "name": "gates"}},
        {"experiment": str(EXPERIMENTS / "s1-kill-one-replica.yaml")},
    ])
    with pytest.raises(SpecError) as err:
        gameday.schedule(loaded, "0 9 * * mon", storage="disk", name="Weekly", now=MONDAY)
    where = loaded.path
    assert str(err.value).splitlines() == [
        "--storage: expected one of pvc, configmap, got 'disk'",
        "--name: expected a CronJob name (lower-case letters, digits and '-', up to 52), got 'Weekly'",
        f"{where}: steps[0].via: terminal: a scheduled game day has no one at a terminal; use via: configmap",
        f"{where}: steps[1].configmap.namespace: a game day scheduled in kilocard-system reads ConfigMaps there "
        "only, got team-a",
        "--cron: '0 9 * * mon' never fires inside the window (mon-fri 10:00-16:00 Asia/Shanghai) in the next 400 "
        "days: the game day would never start",
    ]


@pytest.mark.parametrize("cron, message", [
    ("0 10 * * mun", "--cron: day-of-week (field 5 of '0 10 * * mun'): 'mun' is not a number or a day of the week; "
                     "expected 0-6 or sun-sat"),
    ("0 10 30 2 *", "--cron: '0 10 30 2 *' never fires inside the window (mon-fri 10:00-16:00 Asia/Shanghai) in the "
                    "next 400 days: the game day would never start"),
])
def test_a_bad_cron_is_invalid_input(tmp_path, cron, message):
    with pytest.raises(SpecError) as err:
        gameday.schedule(plan(tmp_path), cron, now=MONDAY)
    assert str(err.value) == message
    assert err.value.exit == 2


def test_a_window_already_over_is_refused(tmp_path):
    loaded = plan(tmp_path, window={"not_after": "2025-01-01T00:00:00+00:00"})
    with pytest.raises(SpecError, match=r"never fires inside the window \(not after 2025-01-01T00:00:00\+00:00\)"):
        gameday.schedule(loaded, "@hourly", now=MONDAY)
