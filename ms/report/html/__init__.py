"""The browsable report: `ms-report SWEEP_DIR... --html [DIR]` writes a static site that opens from
file:// with nothing fetched from the network: the claims, figures and sharing matrices; per run and
fill every test question (filterable by agent, searchable) with its prompt, retrieved memories, answer,
reference and values; per memory the gate's decision, its utility and its retrievals; a sharing cell's
retrievals; two runs of a claim side by side.

Modules: memories (each memory's record and text: the pool file, or rebuilt from the run's data and
decisions.jsonl), prompts (the run's prompt template for the page to render), rundata (data/run-<n>.js),
front (data/site.js), site (write_site); static/ holds the page, its scripts and its style."""
