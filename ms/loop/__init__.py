"""The loop (`pipeline`: seed -> stream -> evaluate, over the parts the composition root `compose_run`
builds) and what a run needs around it; ARCHITECTURE.md lists the modules."""
