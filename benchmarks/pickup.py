"""Pickup latency: a job sent to an idle worker, until the worker has claimed it.

    python -m benchmarks.pickup      (run by benchmarks.orchestration, once per broker)

Runs in its own process because the broker is a setting: the environment it is started with
(CELERY_BROKER_URL, DATABASE_URL of the benchmark database) decides where it sends. Each round
starts a one-trial study on an idle worker and reads, from the database, the time from the
study's start (the same transaction that sends the wake-up once it commits) to its trial's
row being created by the worker's claim. Prints {"pickup_ms": [...]} as its last line."""

import json
import os
import sys
import time

ROUNDS = 20


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    from benchmarks.harness import Worker, wait_finished
    from benchmarks.orchestration import _study
    from experiments.models import Dataset, Team

    team = Team.objects.get(name="bench")
    dataset = Dataset.objects.filter(team=team).first()
    worker = Worker(dict(os.environ), f"pickup-{os.getpid()}", concurrency=1)
    samples = []
    try:
        for round_ in range(ROUNDS + 2):  # the first two warm the worker's child up
            study = _study(team, dataset, trials=1, sleep=0.01)
            wait_finished(study, timeout=300)
            trial = study.trials.get()
            if round_ >= 2:
                samples.append(round((trial.started - study.started).total_seconds() * 1000, 1))
            time.sleep(0.5)  # the worker is idle again, its child waiting for the next message
    finally:
        worker.stop()
    print(f"pickup ms with {os.environ['CELERY_BROKER_URL'].split(':')[0]}: {samples}", file=sys.stderr)
    print(json.dumps({"pickup_ms": samples}))


if __name__ == "__main__":
    main()
