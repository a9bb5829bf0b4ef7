"""Capacity, the field account's formula done right: KV-cache demand from the model's shape and
the load, against the free KV capacity of Ready replicas, with 20-30 % headroom.

    KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x bytes per element
    tokens held        = requests in flight (Little's law: qps x mean request latency)
                         x tokens per request (prompt + output)
    demand             = tokens held x KV bytes per token
    supply             = cards of Ready replicas x KV bytes per card (HBM left after weights)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from probes.snapshot import ClusterSnapshot, PodView
from probes.verdict import Verdict, failed, passed

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "fp8": 1, "int8": 1, "int4": 0.5}
KV_BYTES_PER_CARD = 40 * 2**30  # an 80 GB card after weights and activations; a parameter everywhere


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, dtype: str) -> int:
    return int(2 * layers * kv_heads * head_dim * DTYPE_BYTES.get(dtype, 2))


@dataclass(frozen=True)
class Demand:
    qps: float
    prompt_tokens: int
    output_tokens: int
    latency_seconds: float  # mean end-to-end request time

    def tokens_held(self) -> float:
        return self.qps * self.latency_seconds * (self.prompt_tokens + self.output_tokens)


def kv_per_token_of(pod: PodView) -> int:
    labels = pod.labels
    try:
        return kv_bytes_per_token(int(labels["kilocard.io/layers"]), int(labels["kilocard.io/kv-heads"]),
                                  int(labels["kilocard.io/head-dim"]), labels.get("kilocard.io/dtype", "float16"))
    except KeyError as missing:
        raise ValueError(f"{pod.namespace}/{pod.name} has no model-shape label {missing}") from None


def fits(snapshot: ClusterSnapshot, model: str, demand: Demand, headroom: float = 0.25,
         kv_bytes_per_card: int = KV_BYTES_PER_CARD, losing_nodes: tuple[str, ...] = (),
         namespace: str | None = None) -> Verdict:
    """Does the free KV capacity of the Ready replicas (minus those on `losing_nodes`) cover the
    demand with `headroom` to spare?"""
    replicas = snapshot.replicas(model, namespace)
    if not replicas:
        return failed(f"{model}: no replica at all", model=model)
    per_token = kv_per_token_of(replicas[0])
    serving = [p for p in replicas if p.ready and p.node not in losing_nodes]
    supply = sum(p.cards for p in serving) * kv_bytes_per_card
    need = demand.tokens_held() * per_token * (1 + headroom)
    details = {"model": model, "kv_bytes_per_token": per_token, "need_bytes": need, "supply_bytes": supply,
               "serving_replicas": len({p.group for p in serving}), "headroom": headroom}
    lost = f" after losing {', '.join(losing_nodes)}" if losing_nodes else ""
    if supply < need:
        return failed(f"{model}{lost}: KV demand {need / 2**30:.1f} GiB (with {headroom:.0%} headroom) exceeds "
                      f"the {supply / 2**30:.1f} GiB of {details['serving_replicas']} Ready replicas", **details)
    return passed(f"{model}{lost}: {supply / 2**30:.1f} GiB of KV cache covers {need / 2**30:.1f} GiB "
                  f"(with {headroom:.0%} headroom)", **details)


def cards_needed(demand: Demand, per_token: int, tp_size: int, headroom: float = 0.25,
                 kv_bytes_per_card: int = KV_BYTES_PER_CARD) -> int:
    """Cards for the demand, in whole TP groups."""
    need = demand.tokens_held() * per_token * (1 + headroom)
    groups = math.ceil(need / (kv_bytes_per_card * tp_size)) if need > 0 else 0
    return max(groups, 1) * tp_size
