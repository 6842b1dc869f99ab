"""Who helped whom: sharing matrices, the stream's share of each top k, access rules, a poisoned writer."""
