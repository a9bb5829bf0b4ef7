"""Where a connection comes from and how it is set up: a kubeconfig, the pod's ServiceAccount, or
the local testbed; the user agent the cluster's audit log names; the pool sized to the batch width;
and the REST client that notes every write to a pod or node (chaos.written)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
from kubernetes import client
from kubernetes.client import rest

from chaos import __version__, written

FIELD_MANAGER = "kilocard"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Requests in flight at once for batched calls: bounded, enough to keep a busy apiserver fed; the
# connection pool matches it (a request beyond the pool opens, and then drops, a TLS connection).
MAX_IN_FLIGHT = 64


def tuned(configuration: client.Configuration, pool: int) -> client.Configuration:
    """The connection pool matches the batch width. urllib3 would silently retry a 429 that
    carries Retry-After (three times, unseen); `Kube._call` retries it instead, so it is counted
    and a PodDisruptionBudget's 429 on an eviction is never retried. Dropped connections are still
    retried where they happen."""
    configuration.connection_pool_maxsize = pool
    configuration.retries = urllib3.Retry(total=3, respect_retry_after_header=False)
    return configuration



class NotingREST(rest.RESTClientObject):  # type: ignore[misc]
    """The generated client's REST layer, noting its writes to pods and nodes (`written`): a
    follower's snapshot waits until its watch has delivered them."""

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        reply = super().request(method, url, *args, **kwargs)
        if method != "GET" and reply.status < 400:
            written.note(method, urlsplit(url).path, reply.read())  # kept: the caller's read() gets it too
        return reply


COMPONENT_ENV = "KILOCARD_COMPONENT"


def user_agent() -> str:
    """`kilocard/<version> (<component>)`: the toolkit, or a testbed process that names itself in
    $KILOCARD_COMPONENT."""
    return f"kilocard/{__version__} ({os.environ.get(COMPONENT_ENV, 'toolkit')})"


def is_file(name: str) -> bool:
    """A file there; a name the system cannot look up (too long, ~ with no usable $HOME) is none."""
    try:
        return Path(name).expanduser().is_file()
    except (OSError, RuntimeError):
        return False


def kubeconfig_named(kubeconfig: str | os.PathLike[str] | None) -> bool:
    return bool(kubeconfig or os.environ.get("KUBECONFIG") or is_file("~/.kube/config"))


def cluster_named(kubeconfig: str | os.PathLike[str] | None = None) -> bool:
    """Has the user named a cluster (a kubeconfig, $KUBECONFIG, ~/.kube/config, or a pod's own)?
    If not, the local testbed is the one meant."""
    return kubeconfig_named(kubeconfig) or bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
