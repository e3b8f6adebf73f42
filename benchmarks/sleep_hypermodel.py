"""A hypermodel whose training only sleeps: orchestration cost with no TensorFlow compute.

A KerasTuner HyperModel with its own `fit`, so KerasTuner's in-process search and
Tuneboard's workers run exactly the same trials. It hands out a one-weight Keras model
(built once per process) that each system checkpoints as it would any model."""

import time

import keras
import keras_tuner as kt

_model = None


class SleepHyperModel(kt.HyperModel):
    def build(self, hp):
        # One one-weight model per process: creating TensorFlow variables is compute this
        # benchmark leaves out. Checkpointing it each trial is still measured.
        global _model
        hp.Float("x", 0.0, 1.0)
        hp.Fixed("sleep_seconds", 0.2)
        if _model is None:
            inputs = keras.Input((1,))
            _model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
            _model.compile(loss="mse")
        _model.stop_training = False
        return _model

    def fit(self, hp, model, *args, callbacks=None, epochs=1, initial_epoch=0, **kwargs):
        callbacks = keras.callbacks.CallbackList(callbacks or [], model=model, add_history=True)
        callbacks.on_train_begin()
        seconds = hp.get("sleep_seconds") / max(1, epochs - initial_epoch)
        for epoch in range(initial_epoch, epochs):
            callbacks.on_epoch_begin(epoch)
            time.sleep(seconds)
            loss = (hp.get("x") - 0.3) ** 2
            callbacks.on_epoch_end(epoch, {"loss": loss, "val_loss": loss})
            if model.stop_training:
                break
        callbacks.on_train_end()
        return model.history
