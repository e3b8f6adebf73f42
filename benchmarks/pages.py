"""Server time and query counts of the busiest pages at scale.

    python -m benchmarks.pages

Seeds (in the benchmark database) a study with 10,000 finished trials of 50 epochs each
(500,000 epoch rows) and a leaderboard of 1,000 models, then requests the study page, its
chart data and the leaderboard through Django's request handling (no network), 30 times
each (TUNEBOARD_BENCH_REQUESTS) after two warm-ups. Prints one JSON object as its last line and writes
benchmarks/results/pages.json: *_p95_ms (targets <= 300) and *_queries.
"""

import json
import os
import random
import sys
import time

from benchmarks.harness import RESULTS, percentile, setup_django

TRIALS, EPOCHS, MODELS = 10_000, 50, 1_000
# More requests steady the medians a before/after comparison reads (benchmarks/before_after.py).
REQUESTS = int(os.environ.get("TUNEBOARD_BENCH_REQUESTS", "30"))
BATCH = 20_000


def seed():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from experiments.models import Study, TrainedModel, Trial, TrialEpoch
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.studies import study_create
    from experiments.services.teams import team_create
    from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE

    rng = random.Random(0)
    user = get_user_model().objects.create_user("pages", password="x" * 12)
    team = team_create(name="pages", owner=user)
    dataset = dataset_create_bundled(team=team, user=user, bundled_name="digits")
    study = study_create(team=team, user=user, dataset=dataset, name="big study", hypermodel="dense",
                         search_space=DENSE_DEFAULT_SPACE, tuner="random", objective_metric="val_accuracy",
                         objective_direction="max", max_trials=TRIALS)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, started=timezone.now(),
                                             finished=timezone.now())
    started = time.monotonic()
    trials = []
    for number in range(1, TRIALS + 1):
        hp = {"num_layers": rng.randint(1, 3), "units": rng.choice(range(32, 257, 32)),
              "activation": rng.choice(["relu", "tanh", "gelu"]), "dropout": rng.choice([0.0, 0.1, 0.2, 0.3, 0.4]),
              "batch_norm": rng.random() < 0.5, "optimizer": rng.choice(["adam", "sgd", "rmsprop"]),
              "learning_rate": 10 ** rng.uniform(-4, -2)}
        trials.append(Trial(study=study, trial_id=f"{number - 1:05d}", number=number, status=Trial.Status.COMPLETED,
                            hyperparameters=hp, score=rng.uniform(0.5, 0.99), best_epoch=rng.randint(1, EPOCHS),
                            metrics={"val_accuracy": 0.9}, duration_seconds=rng.uniform(5, 60)))
    trials = Trial.objects.bulk_create(trials, batch_size=BATCH // 4)
    rows = []
    for trial in trials:
        for epoch in range(EPOCHS):
            loss = 2.0 / (epoch + 1) + rng.random() * 0.1
            rows.append(TrialEpoch(trial_id=trial.pk, epoch=epoch, metrics={
                "loss": loss, "accuracy": 1 - loss / 3, "val_loss": loss * 1.1, "val_accuracy": 1 - loss / 2.5}))
            if len(rows) >= BATCH:
                TrialEpoch.objects.bulk_create(rows)
                rows = []
    TrialEpoch.objects.bulk_create(rows)
    models = [
        TrainedModel(team=team, dataset=dataset, study=study, trial=trials[i], name=f"model-{i % 20}",
                     version=i // 20 + 1, method="retrain", epoch_source="detect", seed=i,
                     hyperparameters=trials[i].hyperparameters, status=TrainedModel.Status.COMPLETED,
                     val_metrics={"accuracy": rng.uniform(0.8, 0.99), "loss": rng.uniform(0.05, 0.5)},
                     test_metrics={"accuracy": rng.uniform(0.8, 0.99), "loss": rng.uniform(0.05, 0.5)},
                     created_by=user, finished=timezone.now())
        for i in range(MODELS)
    ]
    TrainedModel.objects.bulk_create(models, batch_size=500)
    print(f"seeded {TRIALS} trials, {TRIALS * EPOCHS} epochs, {MODELS} models in "
          f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    return user, study, dataset


def measure(client, url: str) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        assert client.get(url).status_code == 200, url
    samples = []
    for _ in range(REQUESTS):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return {"p95_ms": round(percentile(samples, 95), 1), "median_ms": round(sorted(samples)[len(samples) // 2], 1),
            "queries": len(queries), "bytes": len(response.content)}


def main() -> None:
    setup_django()
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    setup_test_environment()  # lets the client's "testserver" host through ALLOWED_HOSTS
    user, study, dataset = seed()
    client = Client()
    client.force_login(user)
    pages = {
        "study_page": reverse("study_detail", args=[study.id]),
        "chart_data": reverse("study_chart_data", args=[study.id]),
        "leaderboard": reverse("leaderboard") + f"?dataset={dataset.id}",
    }
    result = {}
    for name, url in pages.items():
        figures = measure(client, url)
        print(f"{name}: {figures}", file=sys.stderr)
        result[f"{name}_p95_ms"] = figures["p95_ms"]
        result[f"{name}_queries"] = figures["queries"]
        result[f"{name}_median_ms"] = figures["median_ms"]
        result[f"{name}_kb"] = round(figures["bytes"] / 1024, 1)
    result.update({"trials": TRIALS, "epochs_per_trial": EPOCHS, "models": MODELS,
                   "targets": {"p95_ms": 300}})
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pages.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
