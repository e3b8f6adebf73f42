"""Fair share across teams on one queue, with real workers and sleep trials.

    python -m benchmarks.fair_share

PostgreSQL and Redis as the tests use them, a database of its own; one worker of SLOTS slots on the
`cpu` queue; trials that only sleep (benchmarks/sleep_hypermodel.py). Writes
benchmarks/results/fair_share.json:
- jain_fairness_index: Jain's index (sum x)^2 / (n sum x^2) of the slot-seconds each team held over
  the contended window (from the last team's arrival to the first team's last trial start), two
  teams with equal shares arriving 2 s apart; jain_fairness_index_three_teams with a third team.
- second_team_wait_seconds: the second team's study start to its first trial's start (the target:
  at most one trial's duration plus pickup); trial_seconds says how long a trial sleeps.
- quota_overrun_trials: trials of a team with a quota of 1 concurrent trial started while another
  of its trials ran (0 is the target).
- claim_overhead_ms: median in-process claim (claim + finish of one trial, no worker) with fair share
  on minus off, 2 teams x 4 studies waiting; both medians given.
- preemption_waiting_study_start_seconds: with preemption on and every slot busy with a low-priority
  team's 8-epoch trials (1 s an epoch), another team's study start to its first trial's start (the
  reaper's pass, 5 s by default, plus the victim's epoch end); preemption_to_resumed_start_seconds:
  the preempted attempt's stop to its retry's start; preempted_trial_epochs_in_all (8 each round).
- broker_order (the same two-team run with TUNEBOARD_FAIR_SHARE=false) for comparison.
"""

import json
import os
import statistics
import sys
import time

from benchmarks.harness import RESULTS, Worker, setup_django, wait_finished

SLOTS = 4
TRIAL_SECONDS = 2.0
ROUNDS = 3


def _space(sleep: float) -> list[dict]:
    return [{"name": "x", "type": "float", "min": 0.0, "max": 1.0, "step": None, "sampling": "linear",
             "parent": None, "parent_values": []},
            {"name": "sleep_seconds", "type": "fixed", "value": sleep, "parent": None, "parent_values": []}]


def _team(name: str):
    from experiments.models import Team
    from experiments.services.datasets import dataset_create_bundled

    team = Team.objects.create(name=name)
    return team, dataset_create_bundled(team=team, user=None, bundled_name="iris")


def _study(team, dataset, *, trials: int, parallelism: int, start: bool = True, seconds: float = TRIAL_SECONDS,
           epochs: int = 1, priority: str = "normal"):
    from experiments.services.studies import study_create, study_start

    study = study_create(team=team, user=None, dataset=dataset, name=f"{team.name} {trials} trials",
                         hypermodel="sleep", search_space=_space(seconds), tuner="random",
                         objective_metric="val_loss", objective_direction="min", max_trials=trials, epochs=epochs,
                         batch_size=32, patience=epochs, parallelism=parallelism, priority=priority)
    return study_start(study=study) if start else study


def _held(trials, start, end) -> float:
    return sum(max(0.0, (min(t.finished, end) - max(t.started, start)).total_seconds()) for t in trials)


def jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if any(values) else 0.0


def _contended(studies_by_team: dict, arrivals: list) -> tuple[float, float]:
    """Jain's index over the window in which every team wanted slots, and its length."""
    from experiments.models import Trial

    trials = {team: list(Trial.objects.filter(study=s, status="completed")) for team, s in studies_by_team.items()}
    start = max(arrivals)
    end = min(max(t.started for t in rows) for rows in trials.values())
    return jain([_held(rows, start, end) for rows in trials.values()]), (end - start).total_seconds()


def _run_teams(env, arrivals_s: list[float], trials: list[int], *, fair: bool, quota_team: int | None = None):
    from experiments.models import Study, TeamQueuePolicy, Trial

    worker = Worker({**env, "TUNEBOARD_FAIR_SHARE": "true" if fair else "false"}, f"fair{time.monotonic_ns()}",
                    SLOTS)
    try:
        teams = [_team(f"team-{i}-{time.monotonic_ns()}") for i in range(len(arrivals_s))]
        if quota_team is not None:
            TeamQueuePolicy.objects.create(team=teams[quota_team][0], queue="cpu", max_concurrent=1)
        warm = _study(*teams[0], trials=SLOTS, parallelism=SLOTS)  # every child loads Keras before the clock
        wait_finished(warm)
        began = time.monotonic()
        studies = {}
        for i, ((team, dataset), arrive, n) in enumerate(zip(teams, arrivals_s, trials, strict=True)):
            time.sleep(max(0.0, began + arrive - time.monotonic()))
            studies[i] = _study(team, dataset, trials=n, parallelism=SLOTS)
        for study in studies.values():
            wait_finished(study)
            assert study.status == Study.Status.COMPLETED, study.message
        index, window = _contended(studies, [s.started for s in studies.values()])
        second = studies[1]
        first_trial = Trial.objects.filter(study=second).order_by("started").first()
        overrun = 0
        if quota_team is not None:
            rows = list(Trial.objects.filter(study=studies[quota_team]).order_by("started"))
            overrun = sum(any(o.started <= t.started < o.finished for o in rows if o.pk != t.pk) for t in rows)
        return {"jain": index, "window_seconds": window,
                "second_wait": (first_trial.started - second.started).total_seconds(), "overrun": overrun}
    finally:
        worker.stop()


def _preemption(env) -> dict:
    """Every slot busy with a low-priority team's long trials (8 epochs of 1 s); another team's study
    arrives: how long it waits (the reaper's pass, 5 s by default, then the victim's epoch end), and how
    long the preempted trial waits to go on from its epoch."""
    from experiments.models import Study, Trial

    worker = Worker({**env, "TUNEBOARD_PREEMPT_QUEUES": "cpu"}, f"preempt{time.monotonic_ns()}", SLOTS)
    try:
        (a_team, a_data), (b_team, b_data) = (_team(f"preempt-{i}-{time.monotonic_ns()}") for i in range(2))
        warm = _study(a_team, a_data, trials=SLOTS, parallelism=SLOTS)
        wait_finished(warm)
        long = _study(a_team, a_data, trials=SLOTS, parallelism=SLOTS, seconds=8.0, epochs=8, priority="low")
        while Trial.objects.filter(study=long, status="running").count() < SLOTS:
            time.sleep(0.05)
        arriving = _study(b_team, b_data, trials=1, parallelism=1)
        for study in (long, arriving):
            wait_finished(study)
            assert study.status == Study.Status.COMPLETED, study.message
        first = Trial.objects.filter(study=arriving).order_by("started").first()
        stopped = Trial.objects.filter(study=long, preempted__isnull=False).order_by("finished").first()
        retry = Trial.objects.get(study=long, trial_id=stopped.trial_id, attempt=stopped.attempt + 1)
        return {"waiting_study_start_seconds": (first.started - arriving.started).total_seconds(),
                "preempted_to_resumed_seconds": (retry.started - stopped.finished).total_seconds(),
                "resumed_from_epoch": retry.resume["epoch"],
                "epochs_in_all": retry.epochs.count()}
    finally:
        worker.stop()


def _claim_ms(fair: bool) -> float:
    """Median ms of a wake-up claim and its finish in this process, 2 teams x 4 waiting studies."""
    import redis
    from django.conf import settings

    from experiments.services.studies import study_cancel
    from experiments.services.trial_claims import claim_trial, finish_trial
    from experiments.services.trial_oracle import Claimant, Outcome
    from workers.tuners.oracle import KerasTunerOracles

    settings.FAIR_SHARE = fair
    oracles = KerasTunerOracles()
    studies = [_study(*_team(f"claims-{fair}-{t}-{time.monotonic_ns()}"), trials=200, parallelism=4)
               for t in range(2) for _ in range(4)]
    times = []
    for i in range(160):
        study = studies[i % len(studies)]
        began = time.perf_counter()
        claim = claim_trial(study_id=study.id, claimant=Claimant(tuner_id=f"t{i}", worker_host="bench"),
                            oracles=oracles)
        if claim.trial is not None:
            finish_trial(trial_pk=claim.trial.pk, oracles=oracles,
                         outcome=Outcome("completed", score=0.5, best_step=0, metrics={"val_loss": 0.5}))
        times.append((time.perf_counter() - began) * 1000)
    for study in studies:  # no worker is to run them later
        study_cancel(study=study)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    return statistics.median(times[20:])


def main() -> None:
    env = setup_django()
    os.environ["TUNEBOARD_HYPERMODELS"] = env["TUNEBOARD_HYPERMODELS"]
    rounds = []
    for _ in range(ROUNDS):
        two = _run_teams(env, [0.0, 2.0], [40, 12], fair=True, quota_team=None)
        three = _run_teams(env, [0.0, 2.0, 4.0], [40, 12, 12], fair=True)
        quota = _run_teams(env, [0.0, 2.0], [24, 8], fair=True, quota_team=1)
        broker = _run_teams(env, [0.0, 2.0], [40, 12], fair=False)
        preempt = _preemption(env)
        on, off = _claim_ms(True), _claim_ms(False)
        rounds.append({"two": two, "three": three, "quota": quota, "broker": broker, "preempt": preempt,
                       "claim_on": on, "claim_off": off})
        print(json.dumps(rounds[-1]), file=sys.stderr)
    med = statistics.median
    result = {
        "jain_fairness_index": round(med(r["two"]["jain"] for r in rounds), 3),
        "jain_fairness_index_three_teams": round(med(r["three"]["jain"] for r in rounds), 3),
        "second_team_wait_seconds": round(med(r["two"]["second_wait"] for r in rounds), 2),
        "quota_overrun_trials": max(r["quota"]["overrun"] for r in rounds),
        "claim_overhead_ms": round(med(r["claim_on"] - r["claim_off"] for r in rounds), 2),
        "claim_ms_fair_share_on": round(med(r["claim_on"] for r in rounds), 2),
        "claim_ms_fair_share_off": round(med(r["claim_off"] for r in rounds), 2),
        "broker_order": {"jain_fairness_index": round(med(r["broker"]["jain"] for r in rounds), 3),
                         "second_team_wait_seconds": round(med(r["broker"]["second_wait"] for r in rounds), 2)},
        "preemption_waiting_study_start_seconds": round(med(r["preempt"]["waiting_study_start_seconds"]
                                                            for r in rounds), 2),
        "preemption_to_resumed_start_seconds": round(med(r["preempt"]["preempted_to_resumed_seconds"]
                                                         for r in rounds), 2),
        "preempted_trial_epochs_in_all": [r["preempt"]["epochs_in_all"] for r in rounds],
        "contended_window_seconds": round(med(r["two"]["window_seconds"] for r in rounds), 1),
        "trial_seconds": TRIAL_SECONDS, "slots": SLOTS, "rounds": ROUNDS, "per_round": rounds,
        "host": f"{os.cpu_count()} cores",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fair_share.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_round"}))


if __name__ == "__main__":
    main()
