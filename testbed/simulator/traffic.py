"""The requests the fleet's OpenAI endpoint answered, as the load model takes them: each joins its
model's demand (its rate and its shape: prompt, output, and the prefix other requests already
computed), so an experiment's built-in load fills the replicas' queues and KV caches as traffic
would. Pure bookkeeping; the engine drains it at every tick.

Prefix caching as vLLM's automatic prefix caching finds it: a prompt's full blocks of
model.BLOCK_TOKENS tokens, each hashed with the one before it, so a block is a hit only when the
whole prefix up to it was seen; kept per model in a namespace (the replicas serve one prompt
population), newest last, bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from testbed.simulator.model import BLOCK_TOKENS, Shape

PREFIX_BLOCKS_KEPT = 200_000  # per model: a few GiB of KV on a real replica; enough for any shared prefix


def block_hashes(words: list[str]) -> tuple[int, ...]:
    """The chained hashes of a prompt's full blocks (a word is a token to the simulator)."""
    out, last = [], 0
    for start in range(0, len(words) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        last = hash((last, tuple(words[start:start + BLOCK_TOKENS])))
        out.append(last)
    return tuple(out)


class PrefixCache:
    """Block hashes a model's replicas computed lately, newest last."""

    def __init__(self, kept: int = PREFIX_BLOCKS_KEPT) -> None:
        self.kept = kept
        self.seen: OrderedDict[int, None] = OrderedDict()

    def hit(self, hashes: tuple[int, ...]) -> int:
        """Tokens of the prompt's leading blocks already cached; every block is then cached."""
        hits = 0
        for h in hashes:
            if h not in self.seen:
                break
            hits += 1
        for h in hashes:
            self.seen[h] = None
            self.seen.move_to_end(h)
        while len(self.seen) > self.kept:
            self.seen.popitem(last=False)
        return hits * BLOCK_TOKENS


@dataclass
class Offered:
    """Requests a model took since the last tick, summed."""

    requests: int = 0
    prompt: float = 0.0
    cached: float = 0.0
    output: float = 0.0

    def add(self, prompt_tokens: int, cached_tokens: int, output_tokens: int) -> None:
        self.requests += 1
        self.prompt += prompt_tokens
        self.cached += cached_tokens
        self.output += output_tokens

    def shape(self) -> Shape:
        n = max(self.requests, 1)
        return Shape(self.prompt / n, self.output / n, self.cached / n)

