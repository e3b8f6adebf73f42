"""Ensemble rules that need numbers but no framework: shared by the web (a recipe's preview) and
the workers (a recipe's run). NumPy only; no ORM, no Keras."""
