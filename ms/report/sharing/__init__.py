"""Who helped whom: the sharing matrices (counts, text, heatmap, matrices; baseline, the k = 0 run they are
measured against; grants), the stream's share of each top k (stream_share), access rules learned from the
matrices and scored (access_rule, access_compare) and a poisoned writer's spread (poison)."""
