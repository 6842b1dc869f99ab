"""The browsable report: `ms-report SWEEP_DIR... --html [DIR]` writes a static site that opens from
file:// with nothing fetched from the network: the claims, figures and sharing matrices; per run and
fill every test question (filterable by agent, searchable) with its prompt, retrieved memories, answer,
reference and values; per memory the gate's decision, its utility and its retrievals; a sharing cell's
retrievals; two runs of a claim side by side. static/ holds the page, its scripts and its style."""
