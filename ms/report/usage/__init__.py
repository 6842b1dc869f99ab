"""What the runs' LLM calls cost, what each gate admitted, and the stream-only runs."""
