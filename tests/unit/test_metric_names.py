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


class Series:
    """A Prometheus holding labelled series: it evaluates the locating query's equality matchers and
    groups the matches by the labels of its `by (...)`, as count() by does."""

    def __init__(self, *series, labels=None):
        self.series = series  # each a dict of labels, __name__ included
        self.asked = []
        if labels is not None:
            self.labels = labels

    def custom_query(self, query):
        import re

        self.asked.append(query)
        wanted = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', query.split("[")[0]))
        by = [label.strip() for label in query.rsplit("by (", 1)[1].rstrip(")").split(",")]
        groups = {tuple((k, s[k]) for k in by if s.get(k)) for s in self.series
                  if all(s.get(k) == v for k, v in wanted.items())}
        return [{"metric": dict(g), "value": [0, "1"]} for g in groups]


TTFT = ("vllm:time_to_first_token_seconds_bucket",)


def test_locate_reads_the_labels_a_podmonitor_writes():
    prom = Series({"__name__": TTFT[0], "model_name": "m", "namespace": "ns", "pod": "m-0", "le": "1"})
    stored = metric_names.locate(prom, TTFT, "m", "ns")
    assert (stored.name, stored.pod, stored.namespace) == (TTFT[0], "pod", "namespace")
    assert stored.matchers == 'model_name="m",namespace="ns"'


def test_an_exporter_scraped_without_honor_labels_is_read_by_its_exported_labels():
    """The target's own pod and namespace (the exporter's) are not the replica's: Prometheus kept the
    exposition's as exported_*; reading `pod` would judge every replica as one series."""
    prom = Series(*({"__name__": TTFT[0], "model_name": "m", "namespace": "monitoring", "pod": "exporter-0",
                     "exported_namespace": "ns", "exported_pod": f"m-{i}"} for i in range(2)))
    stored = metric_names.locate(prom, TTFT, "m", "ns")
    assert (stored.pod, stored.namespace) == ("exported_pod", "exported_namespace")
    assert stored.matchers == 'model_name="m",exported_namespace="ns"'
    every = metric_names.locate(prom, TTFT, "m")  # no namespace: the pod's own namespace label with it
    assert (every.pod, every.namespace, every.matchers) == ("exported_pod", "exported_namespace", 'model_name="m"')


def test_the_annotation_jobs_kubernetes_labels_are_found():
    prom = Series({"__name__": "vllm_time_to_first_token_seconds_bucket", "model_name": "m",
                   "kubernetes_namespace": "ns", "kubernetes_pod_name": "m-0"})
    stored = metric_names.locate(prom, TTFT, "m", "ns")
    assert (stored.name, stored.pod, stored.namespace) == ("vllm_time_to_first_token_seconds_bucket",
                                                           "kubernetes_pod_name", "kubernetes_namespace")


def test_labels_named_by_the_user_are_the_only_ones_tried():
    named = metric_names.Labels(pod="instance_pod", namespace="k8s_ns")
    prom = Series({"__name__": TTFT[0], "model_name": "m", "namespace": "ns", "k8s_ns": "ns", "instance_pod": "m-0",
                   "pod": "x"}, labels=named)
    stored = metric_names.locate(prom, TTFT, "m", "ns")
    assert (stored.pod, stored.namespace) == ("instance_pod", "k8s_ns")
    assert all('k8s_ns="ns"' in q for q in prom.asked)
    with pytest.raises(metric_names.MetricNotFound, match=r"in namespace other \(under the label k8s_ns\)"):
        metric_names.locate(prom, TTFT, "m", "other")


def test_series_with_no_pod_label_cannot_be_judged_per_replica():
    stored = metric_names.locate(Series({"__name__": TTFT[0], "model_name": "m", "namespace": "ns"}), TTFT, "m", "ns")
    assert stored.pod is None
    with pytest.raises(metric_names.ProbeError, match="carry no pod label .*--prometheus-pod-label"):
        stored.pod_label("ttft_p95 per replica")


def test_a_model_absent_from_the_namespace_is_not_found_under_any_spelling():
    prom = Series({"__name__": TTFT[0], "model_name": "m", "namespace": "elsewhere", "pod": "m-0"})
    with pytest.raises(metric_names.MetricNotFound, match="of model m in namespace ns"):
        metric_names.locate(prom, TTFT, "m", "ns")
