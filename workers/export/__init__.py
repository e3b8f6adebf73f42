"""A trained model's serving formats: formats.py makes them (`.keras`, and the formats that need
TensorFlow, or leaves those pending for a conversion job), saved_model.py the SavedModel in TF
Serving's layout and its signature, tflite.py the TFLite files (float32, dynamic-range int8)."""
