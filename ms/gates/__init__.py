"""The gates in front of the shared pool: what decides which new pairs become memories. One module
per gate, each a `Gate` (ms.gates.base) registered by name in ms.config.parts.GATES, which says what each
one admits; docs/extending.md says how to add one.
"""
