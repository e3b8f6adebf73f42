"""How fast ensemble weights are fitted, and what ensembling buys on a real dataset.

    python -m benchmarks.ensembles

No services needed: the weight fitting is the worker's pure numpy/scipy code. Prints one
JSON object as its last line and writes benchmarks/results/ensembles.json:
- fit_seconds: Nelder–Mead and greedy selection (50 rounds) on 20 and 50 members x 10,000
  validation rows x 10 classes (targets: <= 1 s at 20, <= 5 s at 50);
- real_dataset: digits (bundled), split as Tuneboard splits it, six diverse small Keras
  members trained on the training split; validation and test log loss of the best member,
  the mean, and the Nelder–Mead and greedy ensembles (weights fitted on validation only);
- recipes: ensemble recipes over studies of two model families on digits_images, breast_cancer
  and a generated harder tabular set (benchmarks/ensemble_recipes.py): the members the rule
  picks, the best member, the mean, Nelder–Mead, greedy and stacking on validation and test,
  whether the method chosen on validation beats the best member on test, and the collapse of
  one study's top 3. `python -m benchmarks.ensembles recipes` runs only this part and keeps the
  JSON's other keys. ENSEMBLE_RECIPES_SEEDS="1,2,3" runs several seeds (about 5 minutes each on
  two busy cores).
"""

import json
import os
import sys
import time

import numpy as np

from benchmarks.harness import RESULTS

ROWS, CLASSES = 10_000, 10


def _synthetic(members: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Members of varied skill, with noise both shared (correlated) and their own."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, ROWS)
    shared = rng.normal(size=(ROWS, CLASSES))
    predictions = []
    for _ in range(members):
        logits = 0.6 * shared + rng.normal(size=(ROWS, CLASSES))
        logits[np.arange(ROWS), y] += rng.uniform(0.5, 3.0)
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        predictions.append(exp / exp.sum(axis=1, keepdims=True))
    return np.stack(predictions), y


def measure_fit_seconds() -> dict:
    from workers.ensembles import blending

    seconds: dict[str, dict[str, float]] = {"nelder_mead": {}, "greedy": {}}
    for members in (20, 50):
        predictions, y = _synthetic(members)
        for method in seconds:
            started = time.perf_counter()
            fit = blending.fit(method, predictions, y, "classification", rounds=50, seed=0)
            seconds[method][str(members)] = round(time.perf_counter() - started, 3)
            print(f"{method} with {members} members: {seconds[method][str(members)]} s, "
                  f"{fit.evaluations} evaluations, val loss {fit.val_loss:.4f}", file=sys.stderr)
    return seconds


def _digits_splits():
    from experiments.datasets.bundled import load_bundled
    from experiments.datasets.splits import split_indices

    parsed = load_bundled("digits")
    train, val, test = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=0)
    return [(parsed.x[i], parsed.y[i]) for i in (train, val, test)]


def _member(units: int, layers: int, learning_rate: float, epochs: int, seed: int, train):
    import keras

    from workers.hypermodels.base import unit_variance_if_constant

    keras.utils.set_random_seed(seed)
    x, y = train
    inputs = keras.Input((x.shape[1],))
    h = keras.layers.Normalization(mean=x.mean(0), variance=unit_variance_if_constant(x.var(0)))(inputs)
    for _ in range(layers):
        h = keras.layers.Dense(units, activation="relu")(h)
    model = keras.Model(inputs, keras.layers.Dense(CLASSES, activation="softmax")(h))
    model.compile(keras.optimizers.Adam(learning_rate), "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0)
    return model


def measure_real_dataset() -> dict:
    from workers.ensembles import blending

    train, val, test = _digits_splits()
    recipes = [(8, 1, 0.01, 5, 1), (16, 1, 0.003, 10, 2), (32, 2, 0.001, 10, 3), (64, 1, 0.03, 4, 4),
               (128, 2, 0.0003, 8, 5), (24, 3, 0.01, 6, 6)]
    members = [_member(*recipe, train=train) for recipe in recipes]
    val_p = np.stack([m.predict(val[0], verbose=0) for m in members]).astype("float64")
    test_p = np.stack([m.predict(test[0], verbose=0) for m in members]).astype("float64")

    def losses(weights):
        return {"val_log_loss": round(blending.metrics(blending.blend(val_p, weights), val[1],
                                                        "classification")["log_loss"], 4),
                "test_log_loss": round(blending.metrics(blending.blend(test_p, weights), test[1],
                                                         "classification")["log_loss"], 4)}

    member_losses = [losses(np.eye(len(members))[i]) for i in range(len(members))]
    best = min(range(len(members)), key=lambda i: member_losses[i]["val_log_loss"])
    result = {"members": len(members), "best_member": member_losses[best]}
    for method in ("mean", "nelder_mead", "greedy"):
        result[method] = losses(blending.fit(method, val_p, val[1], "classification", rounds=50, seed=0).weights)
    result["correlation_mean_off_diagonal"] = round(float(
        blending.correlation(val_p)[~np.eye(len(members), dtype=bool)].mean()), 3)
    return result


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Two threads: the benchmark shares its host, and small models gain little from more.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ.setdefault(name, "2")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
    from benchmarks.ensemble_recipes import measure_recipes

    path = RESULTS / "ensembles.json"
    if sys.argv[1:] == ["recipes"]:
        result = {**json.loads(path.read_text()), "recipes": measure_recipes()}
    else:
        result = {"fit_seconds": measure_fit_seconds(), "real_dataset": measure_real_dataset(), "rows": ROWS,
                  "classes": CLASSES, "targets": {"fit_seconds_20": 1.0, "fit_seconds_50": 5.0},
                  "recipes": measure_recipes()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
