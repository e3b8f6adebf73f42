"""Ensembles on a worker: weight fitting, stacking, the correlation cap, one Keras model from the members, and the
build job's work (CONTRIBUTING.md's code map)."""
