"""The job kinds' work, one module per kind: trials, trained_models (promote, retrain, ensembles),
reruns, conversions, serving_exports, predictions; failures.py turns a crash into its reason."""
