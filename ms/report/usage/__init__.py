"""What the runs' LLM calls cost (usage), what each gate admitted against the references (quality), and
the stream-only runs that only grew a pool (screens)."""
