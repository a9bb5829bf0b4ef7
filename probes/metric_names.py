"""Which spelling of a metric name, and of the labels naming its pod and namespace, a Prometheus
actually stores.

vLLM names its metrics `vllm:...`. prometheus_client >= 0.23 writes them as `vllm_...` in the
OpenMetrics format, which Prometheus 2.x negotiates first, so the same fleet's series land under
either name depending on client and server versions. A query for the wrong spelling returns an
empty vector, which must never be read as "no traffic": resolve the name first.

The labels vary by how the series were scraped. The Prometheus Operator's PodMonitor and
ServiceMonitor write the target's `pod` and `namespace`; when the exposition itself carries them
(an exporter speaking for other pods, scraped without honor_labels) Prometheus keeps its own as
`exported_pod` and `exported_namespace`, the replica's; the community chart's annotation-based
jobs write `kubernetes_pod_name` and `kubernetes_namespace`. `locate` finds which a series carries.
"""

from __future__ import annotations

import re
import urllib.error
from dataclasses import dataclass
from typing import Any, Protocol

import requests

from probes.errors import NoData, ProbeError

_SERVER_ERROR = re.compile(r"HTTP Status Code 5\d\d")


class MetricNotFound(ProbeError):
    pass


class Queryable(Protocol):
    def custom_query(self, query: str) -> list[dict[str, Any]]: ...


def query_failed(what: str, exc: Exception, error: type[ProbeError] = ProbeError) -> ProbeError:
    """The error for a query that raised: Prometheus did not answer (refused, timed out, a 5xx)
    is NoData; an answer of no (bad PromQL, a 401, a 404 from a backend without that endpoint,
    a malformed URL, a TLS handshake that refused our certificate or whose own could not be
    verified) is `error`."""
    return (NoData if _unanswered(exc) else error)(f"{what} failed: {exc}")


def _unanswered(exc: Exception) -> bool:
    if isinstance(exc, urllib.error.HTTPError):  # before URLError, which it is
        return exc.code >= 500
    if isinstance(exc, requests.exceptions.SSLError):  # before ConnectionError, which it is: a no, not silence
        return False
    if isinstance(exc, requests.HTTPError):
        return exc.response is not None and exc.response.status_code >= 500
    if isinstance(exc, (requests.ConnectionError, requests.Timeout, urllib.error.URLError, ConnectionError,
                        TimeoutError)):
        return True
    return bool(_SERVER_ERROR.search(str(exc)))  # prometheus-api-client's "HTTP Status Code 503 (...)"


# A name exists if it has a sample this recent. Not only now: one failed scrape marks the target's
# series stale at once, and an instant query then finds nothing, though the metric is there (its
# gap is the judging code's to read, as missing data, never as a misspelt name).
LOOKBACK = "5m"


def spellings(name: str) -> list[str]:
    """The names a metric may be stored under, the documented one first."""
    alternatives = [name]
    if ":" in name:
        alternatives.append(name.replace(":", "_"))
    return alternatives


def resolve(prom: Queryable, name: str, matchers: str = "") -> str:
    """The spelling of `name` that has series (optionally with extra label matchers)."""
    return resolve_any(prom, (name,), matchers)


def resolve_any(prom: Queryable, names: tuple[str, ...], matchers: str = "") -> str:
    """The first of `names` (in any spelling) with series: the same indicator as vLLM names it,
    its deprecated name, SGLang's. A model is served by whichever engine it is."""
    tried = [candidate for name in names for candidate in spellings(name)]
    found = _first_stored(prom, tried, matchers)
    if found:
        return found[0]
    raise MetricNotFound(f"no series named {' or '.join(tried)}{' with ' + matchers if matchers else ''} in Prometheus")


def _first_stored(prom: Queryable, tried: list[str], matchers: str,
                  by: tuple[str, ...] = ()) -> tuple[str, list[dict[str, Any]]] | None:
    """The first name in `tried` with series matching `matchers`, and their label sets (`by`)."""
    for candidate in tried:
        selector = f'{{__name__="{candidate}"{"," + matchers if matchers else ""}}}'
        query = f"count(last_over_time({selector}[{LOOKBACK}]))" + (f" by ({', '.join(by)})" if by else "")
        try:
            rows = prom.custom_query(query)
        except Exception as exc:  # noqa: BLE001 - the client raises many kinds; query_failed sorts them
            raise query_failed(f"PromQL {query}", exc) from None
        if rows:
            return candidate, rows
    return None


# In the order tried. The namespace as the scrape wrote it first (the usual case); for the pod, a
# series' own label first: `exported_pod` exists only where the exposition named the replica.
NAMESPACE_LABELS = ("namespace", "exported_namespace", "kubernetes_namespace")
POD_LABELS = ("exported_pod", "pod", "kubernetes_pod_name", "pod_name")
_PAIRED = {"exported_pod": "exported_namespace", "pod": "namespace", "kubernetes_pod_name": "kubernetes_namespace"}
MODEL_LABEL = "model_name"  # vLLM's and SGLang's own label: written by the engine, not the scrape


@dataclass(frozen=True)
class Labels:
    """The labels a user named (configuration kilocard_prometheus_pod_label and _namespace_label);
    None: found by probing."""

    pod: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Stored:
    """A metric as this Prometheus stores it: its name, and the labels naming the replica's pod and
    namespace (None: its series carry none)."""

    name: str
    pod: str | None
    namespace: str | None
    model: str | None = None
    namespace_value: str | None = None

    @property
    def matchers(self) -> str:
        """The label matchers selecting the model (in the namespace) in this spelling."""
        found = [f'{MODEL_LABEL}="{self.model}"'] if self.model else []
        if self.namespace_value and self.namespace:
            found.append(f'{self.namespace}="{self.namespace_value}"')
        return ",".join(found)

    def pod_label(self, what: str) -> str:
        """The pod label, which a per-replica figure needs."""
        if self.pod is None:
            raise ProbeError(f"{what}: the series of {self.name} carry no pod label (tried {', '.join(POD_LABELS)}); "
                             "name it with --prometheus-pod-label (configuration kilocard_prometheus_pod_label)")
        return self.pod


def labels_of(prom: Any) -> Labels:
    """The labels named for this connection (probes.slo.connect), else none: probe."""
    found = getattr(prom, "labels", None)
    return found if isinstance(found, Labels) else Labels()


def locate(prom: Queryable, names: tuple[str, ...], model: str | None = None, namespace: str | None = None) -> Stored:
    """The first of `names` (in any spelling) with series of the model (in the namespace, under
    whichever label carries it), and which labels name their pods and namespaces."""
    named = labels_of(prom)
    tried = [candidate for name in names for candidate in spellings(name)]
    pods = (named.pod,) if named.pod else POD_LABELS
    spaces = (named.namespace,) if named.namespace else NAMESPACE_LABELS
    for space in spaces if namespace else (None,):
        matchers = ",".join(([f'{MODEL_LABEL}="{model}"'] if model else [])
                            + ([f'{space}="{namespace}"'] if space else []))
        found = _first_stored(prom, tried, matchers, tuple(dict.fromkeys(pods + spaces)))
        if found:
            candidate, rows = found
            carried = {label for row in rows for label, value in (row.get("metric") or {}).items() if value}
            pod = next((p for p in pods if p in carried), None)
            if not space:  # the pod's own namespace first: exported_pod's is exported_namespace
                space = next((s for s in (_PAIRED.get(pod or ""), *spaces) if s in carried), None)
            return Stored(candidate, pod, space, model, namespace)
    where = f" of model {model}" if model else ""
    if namespace:
        where += f" in namespace {namespace} (under the label {' or '.join(spaces)})"
    raise MetricNotFound(f"no series named {' or '.join(tried)}{where} in Prometheus")
