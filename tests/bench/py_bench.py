#!/usr/bin/env python3
"""The Python package's read path as mc-bench measures libmc's: Store.batch_get_into of
--batch keys mcb/<size>/<i> (the keys mc-bench makes present) into arena memory from
Store.alloc_buffer(), one call per batch, looping over the keys for --seconds. Prints one
JSON line like mc-bench's ({"gb_per_s": ...}). A miss or a short read is an error (exit 1).

usage: py_bench.py --socket PATH --size BYTES --batch N --keys K --seconds S
"""

import argparse
import json
import sys
import time

import mcstore


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--keys", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    a = ap.parse_args()
    if a.keys < a.batch:
        ap.error("--keys must be at least --batch")
    with mcstore.Store(a.socket) as s:
        buf = s.alloc_buffer(a.size * a.batch)
        base = mcstore.address_of(buf)
        ptrs = [base + i * a.size for i in range(a.batch)]
        sizes = [a.size] * a.batch
        keys = [f"mcb/{a.size}/{i}" for i in range(a.keys)]
        batches = [keys[i:i + a.batch] for i in range(0, a.keys - a.batch + 1, a.batch)]
        calls = items = 0
        lat = []
        t0 = time.monotonic()
        end = t0 + a.seconds
        while True:
            for b in batches:
                c0 = time.monotonic()
                res = s.batch_get_into(b, ptrs, sizes)
                c1 = time.monotonic()
                lat.append(c1 - c0)
                if any(r != a.size for r in res):
                    print(f"py_bench: a read failed: {res}", file=sys.stderr)
                    return 1
                calls += 1
                items += len(b)
                if c1 >= end:
                    break
            if time.monotonic() >= end:
                break
        dt = time.monotonic() - t0
        lat.sort()
        print(json.dumps({"op": "get", "size": a.size, "batch": a.batch, "clients": 1,
                          "keys": a.keys, "ops_per_s": round(items / dt, 1),
                          "gb_per_s": round(items * a.size / dt / 1e9, 4),
                          "p50_us": round(lat[len(lat) // 2] * 1e6, 2),
                          "p99_us": round(lat[int(len(lat) * 0.99)] * 1e6, 2)},
                         separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
