"""The foundations every layer uses, below ms.config and free of torch."""
