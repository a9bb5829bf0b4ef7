"""KV-cache exhaustion on the testbed, through the real path: the capacity formula's predicted onset
of preemption (probes.capacity: Little's law x the request's tokens, against the replicas' KV
caches) against the onset the fleet simulator shows in Prometheus, with the built-in load
(chaos.load) driving the fleet's OpenAI endpoint.

    .venv/bin/python bench/kv_onset.py [--namespace kilocard-fleet] [--step-seconds 20]

Steps the load up on llama-3-8b-long (the default fleet's four replicas, 32,768 tokens of KV cache
each, as their engine's arguments fix it) with 3,072-token prompts and 64-token outputs, and after
each step reads from Prometheus each replica's preemptions over the step (increase of
vllm:num_preemptions_total), its requests running and its KV usage (the step's mean and peak). It
stops at the first step with a preemption and prints the formula's prediction beside it: the QPS
at which the load's KV demand, plus the fleet's own traffic to the model as Prometheus shows it,
passes the cache (and with the field account's 25 % headroom). Needs the local testbed up with the
default fleet (`kilocard testbed up`). Not a test.
"""

from __future__ import annotations

import argparse
import time

from chaos.load import Load, LoadSpec
from chaos.vocabulary import local_testbed_openai, local_testbed_prometheus
from probes import slo
from probes.capacity import Demand

MODEL, PROMPT, OUTPUT = "llama-3-8b-long", 3072, 64
CACHE_TOKENS = 2048 * 16  # --num-gpu-blocks-override 2048, --block-size 16 (its manifest)


def figures(prom: object, namespace: str, seconds: int) -> dict[str, dict[str, float]]:
    """Per replica over the last `seconds`: preemptions, mean running, mean and peak KV usage."""
    where = f'model_name="{MODEL}",namespace="{namespace}"'
    queries = {"preempted": f"increase(vllm:num_preemptions_total{{{where}}}[{seconds}s])",
               "running": f"avg_over_time(vllm:num_requests_running{{{where}}}[{seconds}s])",
               "usage": f"avg_over_time(vllm:kv_cache_usage_perc{{{where}}}[{seconds}s])",
               "peak": f"max_over_time(vllm:kv_cache_usage_perc{{{where}}}[{seconds}s])"}
    out: dict[str, dict[str, float]] = {}
    for name, query in queries.items():
        for row in prom.custom_query(query):  # type: ignore[attr-defined]
            out.setdefault(row["metric"]["pod"], {})[name] = float(row["value"][1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="kilocard-fleet")
    parser.add_argument("--step-seconds", type=int, default=20)
    parser.add_argument("--steps", default="10,12,13,14,15,16,17,18,19,20,22,24", help="QPS of each step")
    parser.add_argument("--quiet", type=int, default=70, help="seconds without load first: a rate window clean")
    args = parser.parse_args()
    prom = slo.connect(local_testbed_prometheus())
    url = f"{local_testbed_openai()}/namespaces/{args.namespace}"
    time.sleep(args.quiet)
    replicas = len(figures(prom, args.namespace, 30))
    # The fleet's own traffic to the model before the load, as its engines count it: it holds blocks too.
    own_rate = slo.value(prom, f'sum(rate(vllm:request_success_total{{model_name="{MODEL}",'
                               f'namespace="{args.namespace}"}}[1m]))') or 0.0
    own_seconds = slo.request_seconds(prom, MODEL, args.namespace, 128, "1m") or 0.0
    print(f"{replicas} replicas of {MODEL}, {CACHE_TOKENS} tokens of KV cache each; the fleet's own traffic "
          f"{own_rate:.2f} requests/s of {own_seconds:.2f} s")
    seconds = None
    for qps in (float(q) for q in args.steps.split(",")):
        spec = LoadSpec(MODEL, qps, PROMPT, OUTPUT, url=url, duration_seconds=args.step_seconds, seed=int(qps))
        running = Load(spec).start()
        running.wait()
        time.sleep(1.5)  # a scrape after the step's last second
        # Read before stopping: stopping waits for the requests in flight, as long as their queue.
        seen = figures(prom, args.namespace, args.step_seconds - 4)
        found = running.stop()["summary"]
        preempted = sum(f.get("preempted", 0.0) for f in seen.values())
        batch = sum(f.get("running", 0.0) for f in seen.values()) / max(len(seen), 1)
        peak = max((f.get("peak", 0.0) for f in seen.values()), default=0.0)
        print(f"{qps:5.1f} QPS: achieved {found['achieved_qps']:.2f}, client P95 TTFT "
              f"{found['ttft_seconds']['p95']}, per replica {batch:.2f} running, peak KV usage {peak:.0%}, "
              f"preempted {preempted:.1f}")
        if preempted > 0:
            break
        # The request's time at this step, before the onset (a wider window would hold an earlier queue).
        seconds = slo.request_seconds(prom, MODEL, args.namespace, OUTPUT, f"{args.step_seconds - 4}s")
    else:
        print("no preemption up to the last step")
        return
    if seconds is None:
        print("no request time measured before the onset")
        return
    supply = replicas * CACHE_TOKENS
    own = Demand(own_rate, 1024, 128, own_seconds).tokens_held()
    for headroom in (0.0, 0.25):
        fits = (supply / (1 + headroom) - own) / Demand(1.0, PROMPT, OUTPUT, seconds).tokens_held()
        print(f"formula{' with 25 % headroom' if headroom else ''}: preemption from {fits:.1f} QPS "
              f"({fits * seconds / replicas:.2f} of the load's requests in flight per replica, {seconds:.2f} s "
              f"a request); observed: first preemption at {qps:g} QPS")


if __name__ == "__main__":
    main()
