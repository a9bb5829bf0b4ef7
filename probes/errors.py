"""A probe that cannot judge raises ProbeError (bad PromQL, a metric that no engine exports, an
argument out of range): never a pass, and never confused with a verdict of "failed".

NoData is the one case a probe answers instead of raising: its source (Prometheus, the apiserver)
did not answer. The Chaos Toolkit probe then returns a failed verdict, outcome "unknown": the run
cannot pass on it, and says that it could not look rather than that the cluster was unhealthy.
"""

from __future__ import annotations

from chaos.errors import KilocardError


class ProbeError(KilocardError):
    """A probe could not reach a verdict; the message says why."""


class NoData(ProbeError):
    """The probe's data could not be fetched: its source did not answer (after the retries)."""
