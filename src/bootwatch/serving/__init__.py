"""After ready: what the server does with its load (throughput, queue, KV use, speculative acceptance), read
from its periodic log lines and its Prometheus /metrics, and the findings that explain a slow server."""

from bootwatch.serving.follow import ServingTracker
from bootwatch.serving.stats import ServingSample

__all__ = ["ServingSample", "ServingTracker"]
