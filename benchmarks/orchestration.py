"""How much the distributed search costs around the trials themselves.

    python -m benchmarks.orchestration        (or `make bench`)

Runs against PostgreSQL and Redis like the tests, in a database of its own. Prints one
JSON object as its last line and writes benchmarks/results/orchestration.json:
- overhead_ms_per_trial: (wall - summed trial time) / trials, one worker process, trials
  that only sleep; keras_tuner_overhead_ms_per_trial: the same trials in KerasTuner's own
  in-process search. A trial's time is the trial as each system records it: building the
  model, fitting it and writing its checkpoint (Trial.duration_seconds here, Tuner.run_trial
  in KerasTuner); everything else (claims, results, queueing, clean-up) is overhead. The
  stricter *_vs_sleep figures count everything but the sleep itself as overhead.
- efficiency_by_workers: summed trial time / (workers x wall) for 2-second trials.
- claim_ms_p95_by_stored_trials: p95 latency of a claim with 10, 100 and 1,000 trials
  stored, each claim following another worker's claim and finish (so the claiming
  worker's cached oracle is stale and refreshes); also the warm (same worker) and cold
  (fresh process) figures.
- claim_ms_p95_at_1000_by_tuner: the same interleaved claim p95 with 1,000 trials stored, for
  each tuner (Bayesian optimisation refits its Gaussian process on every claim).
- lost_trial_recovery_seconds (and _loaded, with a CPU hog on every core): SIGKILL of a worker
  mid-trial to its retry being claimed by the other worker, on the default heartbeat,
  stale-threshold and reaper settings, without beat (the reaper-leader worker reaps).
- lost_slot_recovery_seconds: Redis stopped for 10 s under a CPU hog; from Redis being back to
  both of a study's slots running trials again.
- pickup_ms_p95: a job sent to an idle worker until it is claimed, with Redis and with the
  embedded mode's filesystem transport (benchmarks/pickup.py); the larger of the two.

    python -m benchmarks.orchestration overhead pickup    (some parts: orchestration-partial.json)
"""

import json
import statistics
import sys
import tempfile
import time

from benchmarks.harness import RESULTS, Worker, percentile, setup_django, wait_finished

OVERHEAD_TRIALS = 60
SLEEP_SECONDS = 0.2


def _space(sleep: float) -> list[dict]:
    return [
        {"name": "x", "type": "float", "min": 0.0, "max": 1.0, "step": None, "sampling": "linear",
         "parent": None, "parent_values": []},
        {"name": "sleep_seconds", "type": "fixed", "value": sleep, "parent": None, "parent_values": []},
    ]


def _study(team, dataset, *, trials: int, sleep: float, parallelism: int = 1, start: bool = True,
           tuner: str = "random", epochs: int = 1, space: list | None = None):
    from experiments.services.studies import study_create, study_start

    study = study_create(
        team=team, user=None, dataset=dataset, name=f"bench {tuner} {trials}x{sleep}s p{parallelism}",
        hypermodel="sleep", search_space=space or _space(sleep), tuner=tuner, objective_metric="val_loss",
        objective_direction="min", max_trials=trials, epochs=epochs, batch_size=32, patience=epochs,
        parallelism=parallelism,
    )
    return study_start(study=study) if start else study


def _run(team, dataset, *, trials: int, sleep: float, parallelism: int) -> tuple[float, int, float]:
    """Wall time, completed trials and their summed recorded durations."""
    study = _study(team, dataset, trials=trials, sleep=sleep, parallelism=parallelism)
    wait_finished(study)
    assert study.status == "completed", study.message
    completed = study.trials.filter(status="completed")
    done = completed.count()
    assert done == trials, f"{done} of {trials} trials completed"
    trial_seconds = sum(completed.values_list("duration_seconds", flat=True))
    return (study.finished - study.started).total_seconds(), done, trial_seconds


def _per_trial_ms(wall: float, busy: float, trials: int) -> float:
    return round((wall - busy) / trials * 1000, 1)


def measure_overhead(env, team, dataset) -> dict:
    worker = Worker(env, "overhead", concurrency=1)
    try:
        _run(team, dataset, trials=3, sleep=0.01, parallelism=1)  # warm the worker up
        wall, done, trial_seconds = _run(team, dataset, trials=OVERHEAD_TRIALS, sleep=SLEEP_SECONDS, parallelism=1)
    finally:
        worker.stop()
    return {"overhead": _per_trial_ms(wall, trial_seconds, done),
            "vs_sleep": _per_trial_ms(wall, done * SLEEP_SECONDS, done)}


def measure_keras_tuner_overhead() -> dict:
    import keras_tuner as kt
    import numpy as np

    from benchmarks.sleep_hypermodel import SleepHyperModel

    trial_seconds = []

    class TimedRandomSearch(kt.RandomSearch):
        def run_trial(self, trial, *args, **kwargs):
            started = time.monotonic()
            try:
                return super().run_trial(trial, *args, **kwargs)
            finally:
                trial_seconds.append(time.monotonic() - started)

    x = np.zeros((8, 1), "float32")
    with tempfile.TemporaryDirectory() as tmp:
        tuner = TimedRandomSearch(SleepHyperModel(), objective="val_loss", max_trials=OVERHEAD_TRIALS,
                                  directory=tmp, project_name="bench", overwrite=True, seed=1)
        started = time.monotonic()
        tuner.search(x, x, validation_data=(x, x), epochs=1, verbose=0)
        wall = time.monotonic() - started
        done = len(tuner.oracle.trials)
    return {"overhead": _per_trial_ms(wall, sum(trial_seconds), done),
            "vs_sleep": _per_trial_ms(wall, done * SLEEP_SECONDS, done)}


def measure_efficiency(env, team, dataset) -> dict[str, float]:
    efficiency = {}
    for workers in (1, 2, 4, 8):  # six 2-second trials per worker process
        worker = Worker(env, f"scale{workers}", concurrency=workers)
        try:
            # Warm every child process (its first trial loads the dataset and builds Keras and
            # oracle state, ~0.1-0.5 s of CPU): one 2-second trial per child, so that all tasks
            # start before any ends and each lands on its own child; again until every child
            # has run one (children still importing TensorFlow at start take no task).
            warmed: set[str] = set()
            for _ in range(6):
                warm = _study(team, dataset, trials=workers, sleep=2.0, parallelism=workers)
                wait_finished(warm)
                warmed |= {t.split(":")[1] for t in warm.trials.values_list("tuner_id", flat=True)}
                if len(warmed) == workers:
                    break
            assert len(warmed) == workers, f"only {len(warmed)} of {workers} child processes warmed up"
            trials = 6 * workers
            wall, done, _ = _run(team, dataset, trials=trials, sleep=2.0, parallelism=workers)
        finally:
            worker.stop()
        efficiency[str(workers)] = round(done * 2.0 / (workers * wall), 3)
        print(f"efficiency with {workers} workers: {efficiency[str(workers)]}", file=sys.stderr)
    return efficiency


def _claim_and_finish(study_id: int, tuner: str, timed: list | None = None) -> None:
    """In this process: one claim (timed) and its finish, without training."""
    from experiments.services import trial_claims, trial_oracle
    from workers.jobs.trials import ORACLES

    started = time.perf_counter()
    claim = trial_claims.claim_trial(study_id=study_id, oracles=ORACLES,
                                   claimant=trial_oracle.Claimant(tuner_id=tuner, worker_host="bench"))
    if timed is not None:
        timed.append((time.perf_counter() - started) * 1000)
    assert claim.status == "running", claim.status
    value = claim.trial.hyperparameters.get("x", 0.5)
    trial_claims.finish_trial(trial_pk=claim.trial.pk, oracles=ORACLES,
                            outcome=trial_oracle.Outcome("completed", score=(value - 0.3) ** 2, best_step=0))


def _fill_and_time(study, stored: int, *, cold: bool = True) -> dict[str, list[float]]:
    from experiments.models import Study
    from workers.tuners import oracle

    Study.objects.filter(pk=study.pk).update(status="running", parallelism=1)
    for i in range(stored):
        _claim_and_finish(study.id, f"fill-{i}")
    samples = {"interleaved": [], "warm": [], "cold": []}
    for i in range(40):
        mine = oracle._cache.get(study.id)
        oracle._cache.clear()
        _claim_and_finish(study.id, f"other-{i}")  # another worker's claim and finish
        oracle._cache.clear()
        if mine is not None:
            oracle._cache[study.id] = mine  # this worker's cache, now two versions behind
        _claim_and_finish(study.id, f"mine-{i}", samples["interleaved"])
        _claim_and_finish(study.id, f"warm-{i}", samples["warm"])
        if cold and i < 15:
            oracle._cache.clear()
            _claim_and_finish(study.id, f"cold-{i}", samples["cold"])
    return samples


def measure_claims(team, dataset) -> dict:
    results = {"interleaved": {}, "warm": {}, "cold": {}}
    for stored in (10, 100, 1000):
        study = _study(team, dataset, trials=stored + 200, sleep=0.0, start=False)
        samples = _fill_and_time(study, stored)
        for kind, values in samples.items():
            results[kind][str(stored)] = round(percentile(values, 95), 1)
        print(f"claims with {stored} stored: p95 {[(k, results[k][str(stored)]) for k in results]}, "
              f"median interleaved {statistics.median(samples['interleaved']):.1f} ms", file=sys.stderr)
    return results


def measure_claims_by_tuner(team, dataset, stored: int = 1000) -> dict[str, float]:
    """Interleaved claim p95 with `stored` trials, per tuner. The grid has 2,001 cells; Hyperband
    gets epochs enough for brackets that never make a sequential claim wait."""
    grid_space = [{**_space(0.0)[0], "step": 0.0005}, _space(0.0)[1]]
    options = {"random": {}, "bayesian": {}, "hyperband": {"epochs": 27}, "grid": {"space": grid_space}}
    found = {}
    for tuner, extra in options.items():
        study = _study(team, dataset, trials=stored + 200, sleep=0.0, start=False, tuner=tuner, **extra)
        started = time.monotonic()
        samples = _fill_and_time(study, stored, cold=False)["interleaved"]
        found[tuner] = round(percentile(samples, 95), 1)
        print(f"{tuner}: claim p95 at {stored} stored {found[tuner]} ms (median "
              f"{statistics.median(samples):.1f}; filling took {time.monotonic() - started:.0f} s)", file=sys.stderr)
    return found


class CpuHog:
    """The loaded host: a process spinning on every core, beside the workers."""

    def __init__(self):
        import os
        import subprocess

        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                          for _ in range(os.cpu_count() or 2)]

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


def _defaults(env: dict) -> dict:
    """The product's default recovery settings (the benchmark's environment may carry others)."""
    return {k: v for k, v in env.items() if not k.startswith("TUNEBOARD_TRIAL_") and "REAPER" not in k
            and "RESEND" not in k and "CONTINUE" not in k}


def measure_lost_trial_recovery(env, team, dataset, runs: int = 3, loaded: bool = False) -> list[float]:
    """Two workers on the product's default recovery settings, no beat (the reaper-leader worker
    reaps from its main process); SIGKILL the worker running a long trial, time until the other
    worker has claimed the retry. `loaded`: with a CPU hog on every core."""
    import os
    import signal

    from experiments.models import Trial
    from experiments.services.studies import study_cancel

    seconds = []
    hog = CpuHog() if loaded else None
    try:
        for run in range(runs):
            workers = {name: Worker(_defaults(env), name, concurrency=1) for name in (f"r{run}a", f"r{run}b")}
            try:
                study = _study(team, dataset, trials=2, sleep=120.0, parallelism=1, epochs=20)
                deadline = time.monotonic() + 300
                victim = None
                while victim is None and time.monotonic() < deadline:
                    victim = Trial.objects.filter(study=study, status="running").exclude(worker_name="").first()
                    time.sleep(0.05)
                assert victim is not None, "no trial started"
                time.sleep(2)  # mid-trial, after a heartbeat or two
                killed = time.monotonic()
                os.killpg(workers[victim.worker_name.split("@")[0]].process.pid, signal.SIGKILL)
                while not Trial.objects.filter(study=study, trial_id=victim.trial_id, attempt=2).exists():
                    assert time.monotonic() - killed < 300, "the retry was never claimed"
                    time.sleep(0.05)
                seconds.append(round(time.monotonic() - killed, 1))
                print(f"lost trial retried {seconds[-1]} s after the kill (loaded: {loaded})", file=sys.stderr)
                study_cancel(study=study)
            finally:
                for worker in workers.values():
                    if worker.process.poll() is None:
                        worker.stop()
    finally:
        if hog:
            hog.stop()
    return seconds


def measure_lost_slot_recovery(env, team, dataset, runs: int = 2) -> list[float]:
    """One worker with two slots on the default settings, each task running one trial and handing
    its slot back through the broker, a CPU hog on every core; Redis stopped for 10 s (every
    wake-up in it lost, those sent meanwhile refused). Time from Redis being back to both slots
    running trials again."""
    from experiments.models import Trial
    from experiments.services.studies import study_cancel
    from tests.integration.restarts import start_redis, stop_redis

    seconds = []
    hog = CpuHog()
    try:
        for run in range(runs):
            worker = Worker({**_defaults(env), "TUNEBOARD_CONTINUE_SECONDS": "0"}, f"slots{run}", concurrency=2)
            try:
                study = _study(team, dataset, trials=1000, sleep=1.0, parallelism=2, epochs=2)

                def both_running(study=study) -> bool:
                    return Trial.objects.filter(study=study, status="running").count() == 2

                deadline = time.monotonic() + 300
                while not both_running():
                    assert time.monotonic() < deadline, "the study never ran two trials"
                    time.sleep(0.05)
                stop_redis()
                time.sleep(10)
                start_redis()
                back = time.monotonic()
                while not both_running():
                    assert time.monotonic() - back < 300, "the slots never came back"
                    time.sleep(0.05)
                seconds.append(round(time.monotonic() - back, 1))
                print(f"both slots busy {seconds[-1]} s after Redis was back", file=sys.stderr)
                study_cancel(study=study)
            finally:
                worker.stop()
    finally:
        hog.stop()
    return seconds


def measure_pickup(env) -> dict[str, float]:
    """pickup_ms p95 with an idle worker, through Redis and through the embedded mode's
    filesystem transport (on the benchmark's PostgreSQL: the transport is what differs)."""
    import subprocess

    found = {}
    with tempfile.TemporaryDirectory() as var:
        for name, broker in (("redis", env["CELERY_BROKER_URL"]), ("embedded", "filesystem://")):
            done = subprocess.run([sys.executable, "-m", "benchmarks.pickup"], capture_output=True, text=True,
                                  env={**env, "CELERY_BROKER_URL": broker, "TUNEBOARD_VAR_DIR": var},
                                  cwd=env["PYTHONPATH"], timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            samples = json.loads(done.stdout.strip().splitlines()[-1])["pickup_ms"]
            found[name] = round(percentile(samples, 95), 1)
            print(f"pickup p95 {name}: {found[name]} ms (median {statistics.median(samples)})", file=sys.stderr)
    return found


PARTS = ("overhead", "efficiency", "claims", "recovery", "slots", "pickup")


def main() -> None:
    """All parts, or those named on the command line (then written to orchestration-partial.json)."""
    parts = sys.argv[1:] or list(PARTS)
    unknown = set(parts) - set(PARTS)
    assert not unknown, f"unknown parts {unknown}; choose from {PARTS}"
    env = setup_django()
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.teams import team_create

    team = team_create(name="bench")
    dataset = dataset_create_bundled(team=team, user=None, bundled_name="iris")
    result: dict = {}
    if "overhead" in parts:
        rounds = [measure_overhead(env, team, dataset) for _ in range(3)]
        print(f"overhead per trial, 3 rounds: {rounds}", file=sys.stderr)
        kt_overhead = measure_keras_tuner_overhead()
        print(f"keras tuner overhead per trial: {kt_overhead}", file=sys.stderr)
        result.update({
            "overhead_ms_per_trial": statistics.median(r["overhead"] for r in rounds),
            "keras_tuner_overhead_ms_per_trial": kt_overhead["overhead"],
            "overhead_vs_sleep_ms_per_trial": statistics.median(r["vs_sleep"] for r in rounds),
            "overhead_vs_sleep_ms_per_trial_rounds": [r["vs_sleep"] for r in rounds],
            "keras_tuner_overhead_vs_sleep_ms_per_trial": kt_overhead["vs_sleep"],
            "overhead_trials": OVERHEAD_TRIALS,
            "trial_sleep_seconds": SLEEP_SECONDS,
        })
    if "efficiency" in parts:
        result["efficiency_by_workers"] = measure_efficiency(env, team, dataset)
    if "claims" in parts:
        claims = measure_claims(team, dataset)
        result.update({
            "claim_ms_p95_by_stored_trials": claims["interleaved"],
            "claim_ms_p95_warm_by_stored_trials": claims["warm"],
            "claim_ms_p95_cold_by_stored_trials": claims["cold"],
            "claim_ms_p95_at_1000_by_tuner": measure_claims_by_tuner(team, dataset),
        })
    if "recovery" in parts:
        quiet = measure_lost_trial_recovery(env, team, dataset)
        loaded = measure_lost_trial_recovery(env, team, dataset, loaded=True)
        result.update({"lost_trial_recovery_seconds": max(quiet), "lost_trial_recovery_seconds_runs": quiet,
                       "lost_trial_recovery_seconds_loaded": max(loaded),
                       "lost_trial_recovery_seconds_loaded_runs": loaded})
    if "slots" in parts:
        slots = measure_lost_slot_recovery(env, team, dataset)
        result.update({"lost_slot_recovery_seconds": max(slots), "lost_slot_recovery_seconds_runs": slots})
    if "pickup" in parts:
        pickup = measure_pickup(env)
        result.update({"pickup_ms_p95": max(pickup.values()), "pickup_ms_p95_by_broker": pickup})
    result["targets"] = {
        "overhead_vs_sleep_ms_per_trial": 20, "efficiency_at_8": 0.97, "claim_ms_p95_at_1000": 100,
        "claim_ms_p95_at_1000_bayesian": 250, "lost_trial_recovery_seconds": 30,
        "lost_trial_recovery_seconds_loaded": 30, "lost_slot_recovery_seconds": 30, "pickup_ms_p95": 2000,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "orchestration.json" if set(parts) == set(PARTS) else "orchestration-partial.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
