"""The `kilocard_*` keys of a Chaos Toolkit configuration, read in one place and typed: which run,
which cluster, where the ledger is, which Prometheus. The strict runner and the CLI write them
(`key`); the actions, the probes and the stop conditions read them (`Settings.of`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import SpecError
from chaos.vocabulary import local_testbed_kubeconfig, local_testbed_prometheus

if TYPE_CHECKING:
    from chaos.kube import Kube
    from probes.slo import Prometheus

PREFIX = "kilocard_"
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key(name: str) -> str:
    """The configuration key of a setting: `kubeconfig` -> `kilocard_kubeconfig`."""
    if name not in _NAMES:
        raise KeyError(name)
    return PREFIX + name


@dataclass(frozen=True)
class Settings:
    run_id: str | None = None  # else $KILOCARD_RUN_ID, else one per process (chaos.actions.run_id_of)
    kubeconfig: str | None = None  # else $KUBECONFIG, ~/.kube/config, in-cluster, the local testbed
    context: str | None = None
    ledger_dir: Path | None = None  # else the default ledger directory
    card_resource: str | None = None  # else the nodes' own (vocabulary.card_resource_of)
    prometheus_url: str = field(default_factory=local_testbed_prometheus)
    scrape_interval: float | None = None  # seconds; else read from Prometheus
    # The labels naming a series' pod and namespace (kubernetes_pod_name, exported_pod, ...); else probed.
    prometheus_pod_label: str | None = None
    prometheus_namespace_label: str | None = None
    grafana_url: str | None = None  # each fault as an annotation region there (chaos.grafana)
    # Seconds a run looks again at a steady state not met while a model it names starts (chaos.settle.before); 0: never.
    settle_seconds: float = 120.0

    @classmethod
    def of(cls, configuration: dict[str, Any] | None) -> Settings:
        """The settings a configuration gives (a key left out, or null, takes its default)."""
        return cls(**cls.given(configuration))

    @classmethod
    def given(cls, configuration: dict[str, Any] | None) -> dict[str, Any]:
        """The settings the configuration names, parsed (SpecError naming the key for a value that is
        not one), without the defaults of those it leaves out: a check needs no testbed's state."""
        cfg = configuration or {}
        given = {f.name: cfg[PREFIX + f.name] for f in fields(cls) if cfg.get(PREFIX + f.name) not in (None, "")}
        if "ledger_dir" in given:
            given["ledger_dir"] = Path(given["ledger_dir"])
        for name in ("scrape_interval", "settle_seconds"):
            if name in given:
                try:
                    given[name] = float(given[name])
                except (TypeError, ValueError):
                    raise SpecError(f"configuration.{key(name)}: expected seconds, got {given[name]!r}") from None
        for name in ("prometheus_pod_label", "prometheus_namespace_label"):
            if name in given and not _LABEL.fullmatch(str(given[name])):
                raise SpecError(f"configuration.{key(name)}: expected a Prometheus label name (letters, digits, "
                                f"underscores; not starting with a digit), got {given[name]!r}")
        return given

    def kube(self) -> Kube:
        """A connection to the cluster these settings name (chaos.kube.Kube.connect)."""
        from chaos.kube import Kube  # the client's import is paid only where a cluster is reached

        return Kube.connect(self.kubeconfig, self.context, local_testbed_kubeconfig())

    def prometheus(self) -> Prometheus:
        """A connection to the Prometheus these settings name, with the series labels they name."""
        from probes import metric_names, slo

        return slo.connect(self.prometheus_url,
                           metric_names.Labels(self.prometheus_pod_label, self.prometheus_namespace_label))


_NAMES = frozenset(f.name for f in fields(Settings))
