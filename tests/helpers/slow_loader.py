"""A stand-in server whose log goes silent while it works: it prints a few vLLM-like lines, then either
reads a weight file slowly (--read FILE --rate BYTES_PER_S) or sleeps (--sleep S), with no output at all,
then says it is ready and waits to be stopped.

Usage: slow_loader.py --model DIR [--read FILE --rate N] [--sleep S]
"""

from __future__ import annotations

import argparse
import sys
import time

CHUNK = 1 << 20


def say(text: str) -> None:
    sys.stdout.write(f"INFO {time.strftime('%m-%d %H:%M:%S')} [loader.py:1] {text}\n")
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--read")
    ap.add_argument("--rate", type=float, default=20e6)
    ap.add_argument("--sleep", type=float, default=0.0)
    a = ap.parse_args()
    say("vLLM API server version 0.32.0")
    say(f"Initializing a V1 LLM engine (v0.32.0) with config: model='{a.model}'")
    say("Starting to load model " + a.model + "...")
    if a.read:
        # Paced reads, no output: what a big model on a slow disk looks like from outside.
        start, done = time.monotonic(), 0
        with open(a.read, "rb", buffering=0) as f:
            while chunk := f.read(CHUNK):
                done += len(chunk)
                ahead = done / a.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    if a.sleep:
        time.sleep(a.sleep)
    say("Loading model weights took 1.0 GiB and 3.0 seconds")
    say("Application startup complete.")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
