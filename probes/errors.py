"""A probe that cannot judge raises ProbeError (bad PromQL, Prometheus unreachable, a metric that
no engine exports): never a pass, and never confused with a verdict of "failed"."""

from __future__ import annotations


class ProbeError(Exception):
    """A probe could not reach a verdict; the message says why."""
