"""Figure 4 and each gate's change since its first fill, the pool-growth plots, and their canvas."""
