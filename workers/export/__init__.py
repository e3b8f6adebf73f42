"""A trained model's serving formats: formats.py makes them, saved_model.py the SavedModel in TF Serving's layout,
tflite.py the TFLite files."""
