"""Recipes: the one trainer, its data and the Gin files that configure it."""
