"""Reproductions of published results: one target per paper experiment."""
