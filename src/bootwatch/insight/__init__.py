"""Startup intelligence: what moves while the log is silent (activity), how big the weights are (weights),
how long phases took before (eta), and the session-side glue that turns them into events (live)."""
