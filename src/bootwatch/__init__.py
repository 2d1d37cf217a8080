"""bootwatch: watch an LLM inference server start up and say, without lying, how it is going."""

__version__ = "0.1.0"
