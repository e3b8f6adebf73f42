"""Fitting one trial or a retrain's runs, one module per step (CONTRIBUTING.md's code map), none of them touching
the ORM."""
