"""Figure 4 and each gate's change since its first fill (figure4), the pool-growth plots (growth), and what
every report figure is drawn on (canvas)."""
