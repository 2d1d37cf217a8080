"""The shared vocabulary: plain data that several layers speak (the tracker's verdict machine, insight, the
sinks). A leaf: it imports nothing of bootwatch's but the leaf helpers (durations), so any layer may use it
without an import cycle (lint-imports checks that)."""
