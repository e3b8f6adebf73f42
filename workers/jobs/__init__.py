"""The job kinds' work, one module per kind: trials (their own study-locked lifecycle),
trained_models (promote, retrain, ensembles), reruns, conversions, serving_exports, predictions,
each run by runner.py (the lifecycle they share); failures.py turns a crash into its reason."""
