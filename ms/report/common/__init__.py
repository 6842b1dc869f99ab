"""What every part of the report reads runs through: the run folders (runs), each option in words (labels,
run_labels), seed replicates and which condition speaks for a table cell (conditions, pairing, gates), the
run records (records), who wrote each memory (writers, forgotten, pool_server) and tables as text (render)."""
