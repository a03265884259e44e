#!/usr/bin/env python3
"""Generate a Mooncake-style prefix-cache trace for `mc-bench --trace`.

One JSON object a line: {"timestamp", "input_length", "output_length", "hash_ids"}, as in
Mooncake's published traces (a hash id names one block of --block-tokens tokens; equal ids
mean equal prefixes). The model, deterministic for a --seed:

  * conversations are drawn with Zipf-like popularity (weight 1 / rank^--zipf), so a few
    are hot and most are cold;
  * every conversation starts with one of --system-prompts shared system prompts
    (--system-blocks blocks each): prefixes shared across conversations;
  * a turn sends the whole conversation so far plus 1 .. --turn-blocks new blocks; the
    answer (0 .. --output-blocks blocks) joins the conversation, so the next turn's request
    repeats this one as its prefix (conversations grow over turns);
  * a conversation longer than --max-blocks ends; a new one takes its place.

usage: scripts/gen-trace.py [--requests N] [--conversations C] [--seed S] ... > trace.jsonl
"""
import argparse
import json
import random
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--conversations", type=int, default=300)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--system-prompts", type=int, default=4)
    p.add_argument("--system-blocks", type=int, default=4)
    p.add_argument("--turn-blocks", type=int, default=4)
    p.add_argument("--output-blocks", type=int, default=2)
    p.add_argument("--max-blocks", type=int, default=64)
    p.add_argument("--block-tokens", type=int, default=512)
    p.add_argument("--mean-gap-ms", type=float, default=50.0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    for name in ("requests", "conversations", "system_prompts", "system_blocks",
                 "turn_blocks", "max_blocks", "block_tokens"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.output_blocks < 0 or a.zipf < 0 or a.mean_gap_ms < 0:
        p.error("--output-blocks, --zipf and --mean-gap-ms must not be negative")

    rng = random.Random(a.seed)
    next_id = 0

    def fresh(n):
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    systems = [fresh(a.system_blocks) for _ in range(a.system_prompts)]

    def new_conversation():
        return list(rng.choice(systems))

    convs = [new_conversation() for _ in range(a.conversations)]
    weights = [1.0 / (r + 1) ** a.zipf for r in range(a.conversations)]
    ts = 0.0
    out = sys.stdout
    for _ in range(a.requests):
        c = rng.choices(range(a.conversations), weights)[0]
        if len(convs[c]) + a.turn_blocks > a.max_blocks:
            convs[c] = new_conversation()
        convs[c] += fresh(rng.randint(1, a.turn_blocks))
        ids = list(convs[c])
        nout = rng.randint(0, a.output_blocks)
        ts += rng.expovariate(1.0 / a.mean_gap_ms) if a.mean_gap_ms > 0 else 0.0
        out.write(json.dumps({
            "timestamp": int(ts),
            "input_length": len(ids) * a.block_tokens - rng.randint(0, a.block_tokens - 1),
            "output_length": max(1, nout * a.block_tokens - rng.randint(0, a.block_tokens - 1)),
            "hash_ids": ids,
        }, separators=(",", ":")) + "\n")
        convs[c] += fresh(nout)


if __name__ == "__main__":
    main()
