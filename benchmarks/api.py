"""Server time and query counts of the API's busiest reads at scale.

    python -m benchmarks.api

Seeds (in the benchmark database) two teams: a small one (100 trials, 100 models) and a
large one (10,000 finished trials, 1,000 models), then requests, with a Bearer token through
Django's whole request path (middleware, authentication, team scoping, serialisation; no
network), 30 times each after two warm-ups:
- the trial list polled incrementally (`?after=<id>`: the 50 newest trials) and its first page;
- the leaderboard of the dataset.
Prints one JSON object as its last line and writes benchmarks/results/api.json: *_p95_ms
(target <= 100) and *_queries at both sizes (they must be equal: no query per row).
"""

import json
import os
import random
import sys
import time

from benchmarks.harness import RESULTS, percentile, setup_django

SIZES = {"small": (100, 100), "large": (10_000, 1_000)}
REQUESTS = int(os.environ.get("TUNEBOARD_BENCH_REQUESTS", "30"))  # more steady a before/after median


def seed(label: str, n_trials: int, n_models: int):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from experiments.models import Study, TrainedModel, Trial
    from experiments.services.api_tokens import api_token_create
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.studies import study_create
    from experiments.services.teams import team_create
    from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE

    rng = random.Random(0)
    user = get_user_model().objects.create_user(f"api-{label}", password="x" * 12)
    team = team_create(name=f"api-{label}", owner=user)
    dataset = dataset_create_bundled(team=team, user=user, bundled_name="digits")
    study = study_create(team=team, user=user, dataset=dataset, name=f"{label} study", hypermodel="dense",
                         search_space=DENSE_DEFAULT_SPACE, tuner="random", objective_metric="val_accuracy",
                         objective_direction="max", max_trials=n_trials)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, started=timezone.now(),
                                             finished=timezone.now())
    trials = Trial.objects.bulk_create([
        Trial(study=study, trial_id=f"{number - 1:05d}", number=number, status=Trial.Status.COMPLETED,
              hyperparameters={"units": rng.choice(range(32, 257, 32)), "learning_rate": 10 ** rng.uniform(-4, -2)},
              score=rng.uniform(0.5, 0.99), best_epoch=rng.randint(1, 50),
              metrics={"val_accuracy": rng.uniform(0.5, 0.99), "val_loss": rng.uniform(0.05, 1.0)},
              duration_seconds=rng.uniform(5, 60))
        for number in range(1, n_trials + 1)
    ], batch_size=2_000)
    TrainedModel.objects.bulk_create([
        TrainedModel(team=team, dataset=dataset, study=study, trial=trials[i % len(trials)], name=f"model-{i % 20}",
                     version=i // 20 + 1, method="retrain", epoch_source="detect", seed=i,
                     hyperparameters=trials[i % len(trials)].hyperparameters, status=TrainedModel.Status.COMPLETED,
                     val_metrics={"accuracy": rng.uniform(0.8, 0.99), "loss": rng.uniform(0.05, 0.5)},
                     test_metrics={"accuracy": rng.uniform(0.8, 0.99), "loss": rng.uniform(0.05, 0.5)},
                     created_by=user, finished=timezone.now())
        for i in range(n_models)
    ], batch_size=500)
    _, token = api_token_create(user=user, name="benchmark", team_id=team.id, role="owner")
    return token, study, dataset, trials


def measure(client, url: str, token: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for _ in range(2):
        assert client.get(url, **headers).status_code == 200, url
    samples = []
    for _ in range(REQUESTS):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url, **headers)
            samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content[:500]
    return {"p95_ms": round(percentile(samples, 95), 1), "median_ms": round(sorted(samples)[len(samples) // 2], 1),
            "queries": len(queries), "kb": round(len(response.content) / 1024, 1)}


def main() -> None:
    setup_django()
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the client's "testserver" host through ALLOWED_HOSTS
    client = Client()
    result: dict = {"requests": REQUESTS, "sizes": {k: {"trials": t, "models": m} for k, (t, m) in SIZES.items()}}
    for label, (n_trials, n_models) in SIZES.items():
        started = time.monotonic()
        token, study, dataset, trials = seed(label, n_trials, n_models)
        print(f"{label}: seeded {n_trials} trials and {n_models} models in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
        urls = {
            "trials_after": f"/api/v1/studies/{study.id}/trials/?after={trials[-51].pk}",
            "trials_first_page": f"/api/v1/studies/{study.id}/trials/?ordering=-score",
            "leaderboard": f"/api/v1/leaderboard/{dataset.id}/",
        }
        for name, url in urls.items():
            figures = measure(client, url, token)
            print(f"{label} {name}: {figures}", file=sys.stderr)
            result[f"{name}_p95_ms_{label}"] = figures["p95_ms"]
            result[f"{name}_median_ms_{label}"] = figures["median_ms"]
            result[f"{name}_queries_{label}"] = figures["queries"]
            result[f"{name}_kb_{label}"] = figures["kb"]
    result["targets"] = {"p95_ms": 100, "queries": "equal at both sizes"}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "api.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
