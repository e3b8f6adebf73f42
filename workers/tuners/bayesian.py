"""Tuneboard's Bayesian optimisation: KerasTuner's Gaussian-process oracle with a kernel fitted under a prior
and a claim whose cost stays flat as a study grows (docs/design/distributed-search.md)."""

import math

import numpy as np
import scipy.optimize
from keras_tuner.src.engine.trial import TrialStatus
from keras_tuner.src.tuners.bayesian import BayesianOptimizationOracle
from scipy.linalg import solve_triangular
from scipy.spatial.distance import cdist
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import Matern
from threadpoolctl import ThreadpoolController

# Found once per process: looking the BLAS/OpenMP libraries up costs ~3 ms a claim.
_THREADPOOLS: list[ThreadpoolController] = []


def _one_thread():
    if not _THREADPOOLS:
        _THREADPOOLS.append(ThreadpoolController())
    return _THREADPOOLS[0].limit(limits=1)


# A trial's constraint violations, kept among its KerasTuner metrics (workers/tuners/oracle.py, complete).
CONSTRAINT_METRIC = "tuneboard/constraint_{}"


def violated(trial) -> bool:
    """Whether the trial broke one of the study's constraints."""
    return any(name.startswith("tuneboard/constraint_") and trial.metrics.get_last_value(name) > 0
               for name in trial.metrics.metrics)


class GaussianProcessSearch(BayesianOptimizationOracle):
    GP_REFIT_GROWTH = 1.1
    GP_FIT_SUBSET = 256  # the process that predicts: one Cholesky factorisation of this many
    KERNEL_FIT_SUBSET = 128  # the kernel estimate: many factorisations, so fewer points
    GP_RESTARTS = 8
    MANY_POINTS, GP_RESTARTS_MANY = 64, 2
    LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
    LENGTH_SCALE_PRIOR = (3.0, 6.0)  # Gamma(shape, rate) on each length scale of inputs in [0, 1]
    ACQUISITION_CANDIDATES = 512
    ACQUISITION_REFINED = 3

    kernel_theta: list | None = None
    kernel_fitted_on = 0

    def get_state(self):
        state = super().get_state()
        state["gp_kernel"] = {"theta": self.kernel_theta, "fitted_on": self.kernel_fitted_on}
        return state

    def set_state(self, state):
        super().set_state(state)
        kernel = state.get("gp_kernel") or {}
        self.kernel_theta, self.kernel_fitted_on = kernel.get("theta"), kernel.get("fitted_on", 0)

    def initial_points(self) -> int:
        return self.num_initial_points or max(3 * len(self.hyperparameters.space), 3)

    def populate_space(self, trial_id):
        completed = [t for t in self.trials.values() if t.status == TrialStatus.COMPLETED]
        if len(completed) < self.initial_points() or not self._nonfixed_space():
            return self._random_populate_space()
        with _one_thread():
            gp = self._fit(*self._completed_vectors(completed))
            # The best point not tried yet (on a coarse or small space the process can prefer a
            # tried one); random values, or STOPPED once the space is exhausted, when none is left.
            for point in self._acquire(gp):
                values = self._vector_to_values(point)
                if not self._duplicate(values):
                    return {"status": TrialStatus.RUNNING, "values": values}
        return self._random_populate_space()

    # --- the process -------------------------------------------------------------------------------

    def _vector(self, trial) -> list[float]:
        """A trial's values embedded in [0, 1] per non-fixed hyperparameter (KerasTuner's
        value_to_prob); an inactive or later-added one takes its default."""
        values = trial.hyperparameters
        return [hp.value_to_prob(values.values[hp.name] if values.is_active(hp) and hp.name in values.values
                                 else hp.default) for hp in self._nonfixed_space()]

    def _completed_vectors(self, completed) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([self._vector(t) for t in completed], dtype=float)
        sign = -1.0 if self.objective.direction == "max" else 1.0  # framed as a minimisation
        y = np.nan_to_num(np.array([sign * t.score for t in completed], dtype=float), posinf=0, neginf=0)
        broken = np.array([violated(t) for t in completed], dtype=bool)
        if broken.any():
            # An infeasible trial counts as the worst result seen: the process steers away from it.
            y[broken] = y.max() if broken.all() else y[~broken].max()
        return np.nan_to_num(x, posinf=0, neginf=0), y

    def _kernel(self, dims: int) -> Matern:
        kernel = Matern(nu=2.5, length_scale=np.ones(max(dims, 1)), length_scale_bounds=self.LENGTH_SCALE_BOUNDS)
        if self.kernel_theta is not None and len(self.kernel_theta) == kernel.n_dims:
            kernel = kernel.clone_with_theta(np.array(self.kernel_theta))
        return kernel

    def _subset(self, y: np.ndarray, size: int) -> np.ndarray:
        if len(y) <= size:
            return np.arange(len(y))
        half = size // 2
        order = np.argsort(y)  # best first
        rest = order[half:]
        return np.concatenate([order[:half], rest[np.linspace(0, len(rest) - 1, half).astype(int)]])

    def _fit(self, x: np.ndarray, y: np.ndarray) -> GaussianProcessRegressor:
        completed, dims = len(y), x.shape[1]
        stale = self.kernel_theta is None or len(self.kernel_theta) != max(dims, 1)
        if stale or completed >= self.GP_REFIT_GROWTH * self.kernel_fitted_on:
            # The estimate runs under the study's row lock: past KERNEL_FIT_SUBSET trials on a
            # subset, and with fewer restarts once there are many points to start from.
            fit = self._subset(y, self.KERNEL_FIT_SUBSET)
            restarts = self.GP_RESTARTS if len(fit) <= self.MANY_POINTS else self.GP_RESTARTS_MANY
            self.kernel_theta = None  # start afresh, never from the last estimate
            estimate = GaussianProcessRegressor(
                kernel=self._kernel(dims), normalize_y=True, alpha=self.alpha, n_restarts_optimizer=restarts,
                optimizer=self._most_probable_theta, random_state=np.random.RandomState([self.seed or 0, completed]))
            estimate.fit(x[fit], y[fit])
            self.kernel_theta, self.kernel_fitted_on = estimate.kernel_.theta.tolist(), completed
        subset = self._subset(y, self.GP_FIT_SUBSET)
        x, y = x[subset], y[subset]
        ongoing = [t for t in self.ongoing_trials.values() if t.status == TrialStatus.RUNNING]
        gp = self._fixed(x, y)
        if ongoing:
            # Pessimistic guesses for running trials, so parallel claims spread out.
            x_running = np.array([self._vector(t) for t in ongoing], dtype=float)
            mean, std = Posterior(gp)(x_running)
            gp = self._fixed(np.vstack([x, x_running]), np.concatenate([y, mean + std]))
        return gp

    def _most_probable_theta(self, negative_log_likelihood, theta, bounds):
        """The GaussianProcessRegressor's optimizer: L-BFGS-B, as its own, on the negative log
        marginal likelihood plus the negative log prior of the length scales (theta is their log;
        the prior's density in log space is shape * theta - rate * exp(theta), up to a constant)."""
        shape, rate = self.LENGTH_SCALE_PRIOR

        def objective(log_scales):
            value, gradient = negative_log_likelihood(log_scales, eval_gradient=True)
            scales = np.exp(log_scales)
            return value + float(np.sum(rate * scales - shape * log_scales)), gradient + rate * scales - shape

        found = scipy.optimize.minimize(objective, theta, jac=True, bounds=bounds, method="L-BFGS-B")
        return found.x, found.fun

    def _fixed(self, x, y) -> GaussianProcessRegressor:
        return GaussianProcessRegressor(kernel=self._kernel(x.shape[1]), normalize_y=True, alpha=self.alpha,
                                        optimizer=None).fit(x, y)

    def _acquire(self, gp: GaussianProcessRegressor):
        bounds = self._get_hp_bounds()
        rng = np.random.default_rng([self.seed or 0, len(self.trials)])
        candidates = rng.uniform(bounds[:, 0], bounds[:, 1], size=(self.ACQUISITION_CANDIDATES, len(bounds)))

        posterior = Posterior(gp)

        def lower_confidence_bound(points):
            mean, std = posterior(points)
            return mean - self.beta * std

        scores = lower_confidence_bound(candidates)
        order = np.argsort(scores)
        refined = []
        for start in candidates[order[: self.ACQUISITION_REFINED]]:
            result = scipy.optimize.minimize(lambda v: float(lower_confidence_bound(v)[0]), x0=start, bounds=bounds,
                                             method="L-BFGS-B", options={"maxiter": 30})
            refined.append((float(result.fun), result.x))
        refined.sort(key=lambda pair: pair[0])
        # Best first: the refined optima, then the candidates by their score.
        yield from (point for _, point in refined)
        yield from candidates[order]


class Posterior:
    """A fitted process's mean and standard deviation at points: GaussianProcessRegressor.predict(return_std=True)
    for our Matern(nu=2.5) kernel, operation for operation (the same numbers), without the input validation and
    kernel dispatch it repeats on every call: the acquisition's L-BFGS-B predicts one point at a time, and those
    repeats were most of a claim's time."""

    def __init__(self, gp: GaussianProcessRegressor):
        self.scale = np.squeeze(np.asarray(gp.kernel_.length_scale, dtype=float))
        self.train = gp.X_train_ / self.scale
        self.alpha, self.lower = gp.alpha_, gp.L_
        self.y_mean, self.y_std = gp._y_train_mean, gp._y_train_std

    def __call__(self, points) -> tuple[np.ndarray, np.ndarray]:
        x = np.atleast_2d(points)
        k = cdist(x / self.scale, self.train, metric="euclidean") * math.sqrt(5)
        k = (1.0 + k + k**2 / 3.0) * np.exp(-k)
        mean = self.y_std * (k @ self.alpha) + self.y_mean
        v = solve_triangular(self.lower, k.T, lower=True, check_finite=False)
        variance = np.ones(x.shape[0])  # the kernel's diagonal: a Matern kernel is 1 at distance 0
        variance -= np.einsum("ij,ji->i", v.T, v)
        variance[variance < 0] = 0.0  # rounding: as GaussianProcessRegressor does
        return mean, np.sqrt(variance * self.y_std**2)
