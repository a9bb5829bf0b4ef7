"""Which spelling of a metric name a Prometheus actually stores.

vLLM names its metrics `vllm:...`. prometheus_client >= 0.23 writes them as `vllm_...` in the
OpenMetrics format, which Prometheus 2.x negotiates first, so the same fleet's series land under
either name depending on client and server versions. A query for the wrong spelling returns an
empty vector, which must never be read as "no traffic": resolve the name first.
"""

from __future__ import annotations

import re
import urllib.error
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
    for candidate in tried:
        selector = f'{{__name__="{candidate}"{"," + matchers if matchers else ""}}}'
        query = f"count(last_over_time({selector}[{LOOKBACK}]))"
        try:
            found = prom.custom_query(query)
        except Exception as exc:  # noqa: BLE001 - the client raises many kinds; query_failed sorts them
            raise query_failed(f"PromQL {query}", exc) from None
        if found:
            return candidate
    raise MetricNotFound(f"no series named {' or '.join(tried)}{' with ' + matchers if matchers else ''} in Prometheus")
