import json
import threading
import urllib.error
import urllib.request

import pytest

from testbed.simulator.server import Server
from tests.unit.sim_helpers import pod, world_with

TOKEN = "s3cret-token"


@pytest.fixture
def server():
    def start(negotiate=False, hostname_label="Hostname"):
        w = world_with(pod("big", "n0", "llama-3-70b", 8))
        w.last_tick -= 5
        w.tick()
        srv = Server(("127.0.0.1", 0), w, TOKEN, negotiate, hostname_label)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"

    started: list[Server] = []
    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()


def call(url, method="GET", body=None, token=TOKEN, accept=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers


def test_agent_api_requires_the_bearer_token(server):
    srv, url = server()
    for token in (None, "wrong"):
        status, body, _ = call(f"{url}/nodes/n0/v1/faults", "POST",
                               {"kind": "ecc", "target": {"card": 0}, "ttl_seconds": 5}, token=token)
        assert status == 401 and json.loads(body)["error"] == "missing or wrong bearer token"
    assert srv.world.faults == {}


def test_fault_lifecycle_over_http(server):
    srv, url = server()
    status, body, _ = call(f"{url}/nodes/n0/v1/faults", "POST",
                           {"kind": "ecc", "target": {"card": 2}, "ttl_seconds": 60, "run_id": "r1"})
    assert status == 201
    fault = json.loads(body)
    assert fault["kind"] == "ecc" and fault["node"] == "n0" and fault["expires_at"].endswith("Z")
    status, body, _ = call(f"{url}/nodes/n0/v1/faults")
    assert [f["id"] for f in json.loads(body)["faults"]] == [fault["id"]]
    assert call(f"{url}/nodes/n0/v1/faults/{fault['id']}", "DELETE")[:2] == (
        200, json.dumps({"id": fault["id"], "status": "reverted"}) + "\n")
    assert json.loads(call(f"{url}/nodes/n0/v1/faults/{fault['id']}", "DELETE")[1])["status"] == "already ended"
    assert call(f"{url}/nodes/n0/v1/faults/nope", "DELETE")[0] == 404


@pytest.mark.parametrize("body, field", [
    ({"kind": "meteor", "ttl_seconds": 5}, "kind"),
    ({"kind": "ecc", "target": {"card": 0}}, "ttl_seconds"),
    ({"kind": "ecc", "target": {"card": 8}, "ttl_seconds": 5}, "target.card"),
])
def test_bad_requests_get_4xx_naming_the_field_and_change_nothing(server, body, field):
    srv, url = server()
    status, text, _ = call(f"{url}/nodes/n0/v1/faults", "POST", body)
    assert 400 <= status < 500
    assert json.loads(text)["field"] == field
    assert srv.world.faults == {} and all(c.dbe_vol == 0 for c in srv.world.cards.values())


def test_unknown_node_is_404(server):
    _, url = server()
    status, text, _ = call(f"{url}/nodes/ghost/v1/faults", "POST", {"kind": "ecc", "target": {"card": 0},
                                                                     "ttl_seconds": 5})
    assert status == 404 and json.loads(text)["field"] == "node"


def test_metrics_keep_the_vllm_colon_in_plain_text(server):
    _, url = server()
    status, text, headers = call(f"{url}/metrics", token=None, accept="application/openmetrics-text")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="llama-3-70b"' in text
    assert "vllm:request_success_total{" in text


def test_negotiated_openmetrics_turns_the_colon_into_an_underscore(server):
    """The trap of prometheus_client >= 0.23: a scraper asking for OpenMetrics gets `vllm_`."""
    _, url = server(negotiate=True)
    _, text, headers = call(f"{url}/metrics", token=None, accept="application/openmetrics-text; version=1.0.0")
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert "vllm_time_to_first_token_seconds_bucket{" in text
    assert "vllm:time_to_first_token_seconds_bucket{" not in text


def test_dcgm_exposition_has_the_exporter_names_and_labels(server):
    _, url = server()
    _, text, _ = call(f"{url}/dcgm/metrics", token=None)
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    line = next(x for x in text.splitlines() if x.startswith('DCGM_FI_DEV_XID_ERRORS{gpu="3"'))
    for label in ('UUID="GPU-', 'pci_bus_id="00000000:', 'device="nvidia3"', 'modelName="NVIDIA H100 80GB HBM3"',
                  'Hostname="n0"', 'pod="big"', 'namespace="ns"', 'container="vllm"', 'err_code="0"',
                  'err_msg="No Error"'):
        assert label in line
    # A card no pod holds has no pod labels.
    assert 'pod=' not in next(x for x in text.splitlines() if x.startswith('DCGM_FI_DEV_GPU_TEMP{gpu="0",') and '"n1"' in x)


def test_load_override(server):
    srv, url = server()
    assert call(f"{url}/sim/v1/load", "PUT", {"llama-3-70b": 100}) [0] == 200
    assert srv.world.qps_override == {"llama-3-70b": 100.0}
    assert call(f"{url}/sim/v1/load", "PUT", {"llama-3-70b": -1})[0] == 400
    assert call(f"{url}/sim/v1/load", "PUT", {"x": 1}, token=None)[0] == 401


def test_dcgm_host_label_of_newer_exporters(server):
    _, url = server(hostname_label="hostname")
    _, text, _ = call(f"{url}/dcgm/metrics", token=None)
    assert 'hostname="n0"' in text and "Hostname=" not in text


def test_a_retried_create_with_the_same_idempotency_key_returns_the_first_fault(server):
    from chaos.agent.client import AgentClient

    srv, url = server()
    client = AgentClient(kube=None, token=TOKEN)
    first = client.create(f"{url}/nodes/n0", "ecc", {"card": 1}, {}, 60, "r1", key="r1/f1")
    again = client.create(f"{url}/nodes/n0", "ecc", {"card": 1}, {}, 60, "r1", key="r1/f1")
    other = client.create(f"{url}/nodes/n0", "ecc", {"card": 1}, {}, 60, "r1", key="r1/f2")
    assert again == first and other["id"] != first["id"]
    assert sorted(srv.world.faults) == sorted([first["id"], other["id"]])


def test_an_sglang_replica_exports_sglang_names_and_buckets():
    from prometheus_client import CollectorRegistry, generate_latest

    from testbed.simulator.metrics import VllmCollector

    w = world_with(pod("big", "n0", "llama-3-70b", 8),
                   pod("sg", "n1", "qwen-72b", 8, labels={"kilocard.io/engine": "sglang"}))
    w.last_tick -= 5
    w.tick()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VllmCollector(w))
    text = generate_latest(registry).decode()
    assert 'sglang:time_to_first_token_seconds_bucket{engine="0",le="0.4",model_name="qwen-72b"' in text
    assert 'le="0.5",model_name="qwen-72b"' not in text  # SGLang's default buckets skip 0.5
    assert 'sglang:num_queue_reqs{engine="0",model_name="qwen-72b"' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="llama-3-70b"' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="qwen-72b"' not in text
