"""The one decision of the apply-hold-revert loop, and where exit codes and connections come from."""

import pytest

from chaos.errors import Aborted, Exit, KilocardError, KubeError, SpecError, TargetConflict, exit_code
from chaos.kube import Kube
from chaos.lifecycle import desired_phase


def test_desired_phase():
    assert desired_phase(100.0, None, 30, stopping=False) == "injected"  # still applying
    assert desired_phase(100.0, 90.0, 30, stopping=False) == "injected"
    assert desired_phase(120.0, 90.0, 30, stopping=False) == "recovered"
    assert desired_phase(91.0, 90.0, 30, stopping=True) == "recovered"  # Ctrl-C, SIGTERM, a stop condition
    assert desired_phase(90.0, 90.0, 0, stopping=False) == "recovered"


def test_one_definition_of_the_exit_codes():
    assert [exit_code(e("x")) for e in (SpecError, TargetConflict, KilocardError, KubeError, Aborted)] == [
        Exit.INVALID, Exit.INVALID, Exit.FAILED, Exit.FAILED, Exit.ABORTED]
    assert [int(e) for e in Exit] == [0, 1, 2, 3, 4]


def test_no_cluster_is_a_clear_error(tmp_path, monkeypatch):
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SpecError, match="no cluster: pass --kubeconfig"):
        Kube.connect(fallback=None)
    with pytest.raises(SpecError, match="kubeconfig /nonexistent"):
        Kube.connect("/nonexistent")


def test_in_cluster_reads_the_service_account(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("abc")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    kube = Kube.in_cluster(tmp_path)
    try:
        configuration = kube.api_client.configuration
        assert configuration.host == "https://127.0.0.1:443"
        assert configuration.get_api_key_with_prefix("BearerToken").lower() == "bearer abc"  # no request made
    finally:
        kube.close()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(SpecError, match="in-cluster configuration"):
        Kube.in_cluster(tmp_path)
