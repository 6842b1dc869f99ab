"""The names of the files a run folder holds, in one place: the run writes them, ms-report, the
export and the redo logic read them, and each imports the name from here."""

METRICS_FILE = "metrics.json"  # the run's summary; "complete": true once it finished
PREDICTIONS_FILE = "predictions.jsonl"  # one row per test question per fill
DECISIONS_FILE = "decisions.jsonl"  # one row per gated stream pair
QUALITY_FILE = "quality.jsonl"  # ms-data gate-quality: each decision's answer scored against its reference
USAGE_FILE = "llm_usage.json"  # LLM calls, tokens and cost per backbone and role
FAILED_FILE = "failed.json"  # why an attempt that had begun stopped; removed when the run is resumed
RUN_ID_FILE = "run_id"  # the run's stable id, which its memories in the pool carry
POOL_FILENAME = "pool.sqlite"  # the run's own pool, unless pool.path names a shared one
WRITERS_FILE = "memories.csv"  # who wrote each memory, exported so results/ can be redrawn without pools
