"""traceinsight: why does the GPU sit idle, and what to change first."""

__version__ = "0.1.0"
