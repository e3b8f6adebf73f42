"""The task families benchmarks/search_cost.py measures searches on (its docstring says what each is): learning curves
that report every epoch, a real one (scikit-learn's MLPClassifier on digits) and a synthetic one with known finals
and crossing curves."""

import hashlib
import math
import warnings

import numpy as np

EPOCHS = 27



class RealTask:
    """MLPClassifier on digits, one partial_fit call an epoch. Curves are kept per configuration and trained only
    as far as a caller asked, so a trial pruned at epoch 1 costs one epoch of compute here too."""

    names = ("units", "lr", "alpha", "batch_size")
    data = None

    def __init__(self):
        self.cache = {}  # key -> {"model": MLPClassifier | None, "values": [validation error per epoch]}

    @classmethod
    def _data(cls):
        if cls.data is None:
            from sklearn.datasets import load_digits

            x, y = load_digits(return_X_y=True)
            order = np.random.RandomState(0).permutation(len(x))
            x = x / 16.0
            cls.data = (x[order[:1200]], y[order[:1200]], x[order[1200:]], y[order[1200:]])
        return cls.data

    @staticmethod
    def draw(rng) -> dict:
        return {"units": int(round(math.exp(rng.uniform(math.log(4), math.log(256))))),
                "lr": 10 ** rng.uniform(-4, -1), "alpha": 10 ** rng.uniform(-6, -1),
                "batch_size": int(rng.choice([32, 64, 128, 256]))}

    @staticmethod
    def hyperparameters():
        import keras_tuner as kt

        hp = kt.HyperParameters()
        hp.Int("units", 4, 256, sampling="log")
        hp.Float("lr", 1e-4, 1e-1, sampling="log")
        hp.Float("alpha", 1e-6, 1e-1, sampling="log")
        hp.Choice("batch_size", [32, 64, 128, 256])
        return hp

    @staticmethod
    def key(config: dict) -> tuple:
        # Rounded so that Hyperband's continuous draws and their continuations share one curve.
        return int(config["units"]), float(f"{config['lr']:.4g}"), float(f"{config['alpha']:.4g}"), \
            int(config["batch_size"])

    @staticmethod
    def size(config: dict) -> float:
        return 75.0 * int(config["units"]) + 10.0  # 64 inputs × units + units + units × 10 + 10

    def curve(self, config: dict, epochs: int) -> list[float]:
        from sklearn.neural_network import MLPClassifier

        key = self.key(config)
        entry = self.cache.get(key)
        if entry is None:
            units, lr, alpha, batch = key
            model = MLPClassifier(hidden_layer_sizes=(units,), learning_rate_init=lr, alpha=alpha, batch_size=batch,
                                  random_state=0)
            entry = self.cache[key] = {"model": model, "values": []}
        x_train, y_train, x_val, y_val = self._data()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # overflow at lr 0.1: the error says it
            while len(entry["values"]) < epochs:
                entry["model"].partial_fit(x_train, y_train, classes=np.arange(10))
                entry["values"].append(float(1.0 - entry["model"].score(x_val, y_val)))
        if len(entry["values"]) == EPOCHS:
            entry["model"] = None  # never trained further: free its weights
        return entry["values"][:epochs]

    def finals(self) -> list[float]:
        return [min(e["values"]) for e in self.cache.values() if len(e["values"]) == EPOCHS]


BRANIN_MIN, BRANIN_MAX = 0.397887, 308.13


def branin(x1: float, x2: float) -> float:
    b, c, r, s, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 6, 10, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * math.cos(x1) + s


class SyntheticTask(RealTask):
    """Exponential learning curves whose final value, speed and size come from four continuous hyperparameters."""

    names = ("x1", "x2", "speed", "size")

    @staticmethod
    def draw(rng) -> dict:
        return {"x1": rng.uniform(-5, 10), "x2": rng.uniform(0, 15), "speed": rng.uniform(0, 1),
                "size": rng.uniform(0, 1)}

    @staticmethod
    def hyperparameters():
        import keras_tuner as kt

        hp = kt.HyperParameters()
        hp.Float("x1", -5.0, 10.0)
        hp.Float("x2", 0.0, 15.0)
        hp.Float("speed", 0.0, 1.0)
        hp.Float("size", 0.0, 1.0)
        return hp

    @staticmethod
    def key(config: dict) -> tuple:
        return tuple(round(float(config[name]), 6) for name in SyntheticTask.names)

    @staticmethod
    def size(config: dict) -> float:
        return float(config["size"])

    def curve(self, config: dict, epochs: int) -> list[float]:
        key = self.key(config)
        # The formula gives all 27 values at once; "trained" is how far a caller went (finals() reads it).
        self.reached[key] = max(self.reached.get(key, 0), epochs)
        if key not in self.cache:
            x1, x2, speed, size = key
            quality = math.log1p(max(branin(x1, x2) - BRANIN_MIN, 0.0)) / math.log1p(BRANIN_MAX - BRANIN_MIN)
            # Slow curves (speed near 1) end lower: the ones that lead at the first rungs are not the best at 27.
            final = 0.02 + 0.5 * quality + 0.25 * (1 - size) ** 2 + 0.1 * (1 - speed)
            tau, start = 1 + 10 * speed, 1.0
            seed = int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:4], "big")
            noise = np.random.default_rng(seed).normal(0.0, 0.003, EPOCHS)
            values = [final + (start - final) * math.exp(-t / tau) + float(noise[t - 1]) for t in range(1, EPOCHS + 1)]
            self.cache[key] = {"model": None, "values": values}
        return self.cache[key]["values"][:epochs]

    def __init__(self):
        super().__init__()
        self.reached = {}

    def finals(self) -> list[float]:
        return [min(self.cache[key]["values"]) for key, epochs in self.reached.items() if epochs == EPOCHS]


TASKS = {"real": RealTask, "synthetic": SyntheticTask}
