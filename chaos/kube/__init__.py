"""The one place that talks to the Kubernetes API (an import-linter contract: nothing else imports
`kubernetes`, `httpcore` or `urllib3`). `Kube` is one cluster's connection, its verbs grouped by
what they act on:

    connection    where a connection comes from (kubeconfig, ServiceAccount, the local testbed),
                  its user agent, its pool, the REST layer that notes writes (chaos.written)
    retry         errors as chaos.errors, what is retried (5xx, dropped connections, a rate
                  limit's 429 with Retry-After; never an eviction's 429), every retry counted
    bulk          the HTTP/2 connection of the hot path: every request a stream on it
    api           the base: `_call`, batches, bulk requests, plain-JSON lists, read-modify-write
    nodes, pods, config_maps, objects    the verbs
    watches       a kind listed then followed, conditions waited on, one ConfigMap followed
"""

from __future__ import annotations

from chaos.kube.api import LIST_PAGE
from chaos.kube.config_maps import ConfigMaps
from chaos.kube.connection import COMPONENT_ENV, MAX_IN_FLIGHT, SERVICE_ACCOUNT_DIR, cluster_named, user_agent
from chaos.kube.nodes import Nodes, node_ready
from chaos.kube.objects import Objects
from chaos.kube.pods import Pods, pod_ready
from chaos.kube.retry import retries
from chaos.kube.watches import WATCH_SECONDS, Watches


class Kube(Pods, Nodes, ConfigMaps, Objects, Watches):
    """A connection to one cluster, with every verb kilocard uses."""


__all__ = ["COMPONENT_ENV", "LIST_PAGE", "MAX_IN_FLIGHT", "SERVICE_ACCOUNT_DIR", "WATCH_SECONDS", "Kube",
           "cluster_named", "node_ready", "pod_ready", "retries", "user_agent"]
