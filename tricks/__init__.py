"""Training tricks, each exact to its paper; imports nothing else of the project."""
