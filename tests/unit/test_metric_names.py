import pytest

from probes import metric_names


class FakeProm:
    """Answers count() queries for the series names it holds."""

    def __init__(self, names):
        self.names = names
        self.asked = []

    def custom_query(self, query):
        self.asked.append(query)
        return [{"value": [0, "1"]}] if any(f'"{n}"' in query for n in self.names) else []


def test_spellings():
    assert metric_names.spellings("vllm:num_requests_running") == ["vllm:num_requests_running", "vllm_num_requests_running"]
    assert metric_names.spellings("DCGM_FI_DEV_GPU_TEMP") == ["DCGM_FI_DEV_GPU_TEMP"]


@pytest.mark.parametrize("stored", ["vllm:e2e_request_latency_seconds_count", "vllm_e2e_request_latency_seconds_count"])
def test_resolve_finds_either(stored):
    prom = FakeProm({stored})
    assert metric_names.resolve(prom, "vllm:e2e_request_latency_seconds_count", 'namespace="x"') == stored
    assert all('namespace="x"' in q for q in prom.asked)


def test_resolve_refuses_to_guess():
    with pytest.raises(metric_names.MetricNotFound, match=r"no series named vllm:a or vllm_a with pod=\"p\" in Prometheus"):
        metric_names.resolve(FakeProm(set()), "vllm:a", 'pod="p"')
