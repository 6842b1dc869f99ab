"""Memory Sharing among LLM agents."""

__version__ = "0.1.0"
