"""What a recipe chooses: losses, learning-rate schedules and phases, long-tail heads,
the BiT-HyperRule, and the procedures beside training (decoupled two stages, the LR
range test)."""
