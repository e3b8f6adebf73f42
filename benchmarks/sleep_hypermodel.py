"""A hypermodel whose training only sleeps: orchestration cost with no TensorFlow compute.

A KerasTuner HyperModel with its own `fit`, so KerasTuner's in-process search and
Tuneboard's workers run exactly the same trials. It still builds (and Tuneboard still
checkpoints) a one-weight Keras model, as any real trial would."""

import time

import keras
import keras_tuner as kt


class SleepHyperModel(kt.HyperModel):
    def build(self, hp):
        hp.Float("x", 0.0, 1.0)
        hp.Fixed("sleep_seconds", 0.2)
        inputs = keras.Input((1,))
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        model.compile(loss="mse")
        return model

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
