"""The registry's services on PostgreSQL: versions count up without gaps (also when registrations
race), a model taking another input or doing another task is refused with what differs, and
every alias move is kept, audited, exported and can be rolled back."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from experiments.models import (
    AliasMove,
    AuditEvent,
    ModelAlias,
    ModelVersion,
    RegisteredModel,
    ServingExport,
    TrainedModel,
)
from experiments.selectors.registry import models_registry_entries, registered_model_moves, team_registered_models
from experiments.services import registry as registry_services
from experiments.services.datasets import dataset_create_bundled
from experiments.services.ensembles import ensemble_create
from experiments.services.registry import (
    RegistryError,
    registry_alias_remove,
    registry_alias_rollback,
    registry_alias_set,
    registry_register,
)
from tests.integration.helpers import saved_study
from tests.web.registry_rows import registrable, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(acme, alice, iris):
    return saved_study(acme, alice, iris, name="iris study", hypermodel="dense")


@pytest.fixture
def exports(monkeypatch):
    """The serving exports each move asks for, in order (the real request runs too: several
    moves before a worker comes share one queued export)."""
    asked, real = [], registry_services.serving_export_request

    def spy(*, team, reason, user=None):
        asked.append((team.id, reason, user.username))
        return real(team=team, reason=reason, user=user)

    monkeypatch.setattr(registry_services, "serving_export_request", spy)
    return asked


def test_registering_two_models_makes_versions_1_and_2_of_one_registered_model(acme, alice, study):
    first, second = registrable(acme, alice, study, 1), registrable(acme, alice, study, 2)
    v1 = registry_register(team=acme, model=first, name="iris", user=alice)
    v2 = registry_register(team=acme, model=second, name="iris", user=alice, description="wider")
    registered = RegisteredModel.objects.get()
    assert (v1.version, v2.version, v2.description) == (1, 2, "wider")
    assert (registered.task, registered.dataset_kind) == ("classification", "tabular")
    assert registered.input_signature == [{"name": "input_0", "shape": [None, 4], "dtype": "float32"}]
    assert registered.output_keys == ["output_0"]
    assert AuditEvent.objects.filter(verb="registry.register").count() == 2
    (listed,) = team_registered_models(team=acme)
    assert (listed.version_count, listed.latest_version) == (2, 2)


def test_a_model_taking_another_input_is_refused_with_what_differs(acme, alice, study):
    registry_register(team=acme, model=registrable(acme, alice, study, 1), name="iris", user=alice)
    images = registrable(acme, alice, study, 2, signature=signature(shape=(None, 8, 8, 1), dtype="uint8"))
    with pytest.raises(RegistryError, match=r"its input is uint8 \(None, 8, 8, 1\), not float32 \(None, 4\)"):
        registry_register(team=acme, model=images, name="iris", user=alice)
    assert ModelVersion.objects.count() == 1


def test_a_model_doing_another_task_is_refused(acme, alice, study):
    registry_register(team=acme, model=registrable(acme, alice, study, 1), name="iris", user=alice)
    RegisteredModel.objects.update(task="regression")
    with pytest.raises(RegistryError, match="it does classification, not regression"):
        registry_register(team=acme, model=registrable(acme, alice, study, 2), name="iris", user=alice)


def test_an_unfinished_model_or_one_already_registered_is_refused(acme, alice, study):
    model = registrable(acme, alice, study, 1)
    registry_register(team=acme, model=model, name="iris", user=alice)
    with pytest.raises(RegistryError, match="is already version 1 of iris"):
        registry_register(team=acme, model=model, name="iris", user=alice)
    running = registrable(acme, alice, study, 2, status=TrainedModel.Status.RUNNING)
    with pytest.raises(RegistryError, match="has not completed"):
        registry_register(team=acme, model=running, name="iris", user=alice)
    old = registrable(acme, alice, study, 3, signature={})
    with pytest.raises(RegistryError, match="no recorded input signature"):
        registry_register(team=acme, model=old, name="other", user=alice)
    assert ModelVersion.objects.count() == 1 and RegisteredModel.objects.count() == 1


def test_alias_moves_are_kept_exported_and_rolled_back(acme, alice, study, exports):
    models = [registrable(acme, alice, study, n) for n in (1, 2, 3)]
    for model in models:
        registry_register(team=acme, model=model, name="iris", user=alice)
    registered = RegisteredModel.objects.get()
    made = registry_alias_set(registered=registered, alias="production", version=1, user=alice)
    moved = registry_alias_set(registered=registered, alias="production", version=3, user=alice)
    assert [(m.from_version, m.to_version.version) for m in [made]] == [(None, 1)]
    assert (moved.from_version.version, moved.to_version.version, moved.user) == (1, 3, alice)
    with pytest.raises(RegistryError, match="already points at version 3"):
        registry_alias_set(registered=registered, alias="production", version=3, user=alice)
    with pytest.raises(RegistryError, match="has no version 9"):
        registry_alias_set(registered=registered, alias="production", version=9, user=alice)

    back = registry_alias_rollback(registered=registered, move_id=moved.id, user=alice)
    assert (back.from_version.version, back.to_version.version, back.rollback_of_id) == (3, 1, moved.id)
    assert ModelAlias.objects.get(name="production").version.version == 1
    # Only the latest move of an alias rolls back (rolling back the rollback moves it forward again).
    with pytest.raises(RegistryError, match="has moved since"):
        registry_alias_rollback(registered=registered, move_id=moved.id, user=alice)
    history = registered_model_moves(registered=registered)
    assert [(m.id, m.can_roll_back) for m in history] == [(back.id, True), (moved.id, False), (made.id, False)]

    registry_alias_set(registered=registered, alias="staging", version=2, user=alice)
    removed = registry_alias_remove(registered=registered, alias="staging", user=alice)
    assert (removed.from_version.version, removed.to_version) == (2, None)
    registry_alias_rollback(registered=registered, move_id=removed.id, user=alice)
    assert ModelAlias.objects.get(name="staging").version.version == 2
    assert AliasMove.objects.count() == 6
    assert exports == ([(acme.id, f"version:iris/{n}", "alice") for n in (1, 2, 3)]
                       + [(acme.id, "alias:iris@production", "alice")] * 3
                       + [(acme.id, "alias:iris@staging", "alice")] * 3)
    assert ServingExport.objects.filter(team=acme, status=ServingExport.Status.QUEUED).count() == 1
    assert AuditEvent.objects.filter(verb__in=["registry.alias_set", "registry.alias_remove",
                                               "registry.rollback"]).count() == 6
    badges = models_registry_entries(model_ids=[m.id for m in models])
    assert badges[models[0].id][0]["aliases"] == ["production"] and badges[models[1].id][0]["aliases"] == ["staging"]
    assert badges[models[2].id][0]["aliases"] == []


def test_rolling_back_the_move_that_made_an_alias_removes_it(acme, alice, study, exports):
    registry_register(team=acme, model=registrable(acme, alice, study, 1), name="iris", user=alice)
    registered = RegisteredModel.objects.get()
    made = registry_alias_set(registered=registered, alias="canary", version=1, user=alice)
    undone = registry_alias_rollback(registered=registered, move_id=made.id, user=alice)
    assert undone.to_version is None and not ModelAlias.objects.exists()


def test_an_ensembles_default_name_says_its_dataset(acme, alice, study):
    members = [registrable(acme, alice, study, n) for n in (1, 2)]
    ensemble = ensemble_create(team=acme, user=alice, members=members, method="nelder_mead")
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    other = saved_study(acme, alice, wine, name="wine study", hypermodel="dense")
    on_wine = ensemble_create(team=acme, user=alice, members=[registrable(acme, alice, other, n) for n in (1, 2)],
                              method="nelder_mead")
    assert (ensemble.name, on_wine.name) == ("ensemble-nelder-mead-iris", "ensemble-nelder-mead-wine")
    assert ensemble_create(team=acme, user=alice, members=members, method="nelder_mead").version == 2


@pytest.mark.django_db(transaction=True)
def test_racing_registrations_number_versions_without_gaps(acme, alice, study):
    models = [registrable(acme, alice, study, n) for n in range(1, 7)]

    def register(model):
        try:
            return registry_register(team=acme, model=model, name="iris", user=alice).version
        finally:
            connection.close()  # each thread's own connection

    with ThreadPoolExecutor(max_workers=6) as pool:
        versions = list(pool.map(register, models))
    assert sorted(versions) == [1, 2, 3, 4, 5, 6]
    assert RegisteredModel.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_alias_move_racing_a_registration_of_the_same_model_does_not_deadlock(acme, alice, study, monkeypatch):
    first, second, third = (registrable(acme, alice, study, n) for n in (1, 2, 3))
    registry_register(team=acme, model=first, name="iris", user=alice)
    registered = registry_register(team=acme, model=second, name="iris", user=alice).registered_model
    registering = threading.Event()
    real_audit = registry_services.audit_record

    def slow_audit(**kwargs):
        # The move holds its locks here while a registration of the same model starts.
        if kwargs["verb"] == "registry.alias_set":
            assert registering.wait(10)
            time.sleep(1.5)  # past PostgreSQL's deadlock_timeout (1 s)
        return real_audit(**kwargs)

    monkeypatch.setattr(registry_services, "audit_record", slow_audit)

    def move():
        try:
            return registry_alias_set(registered=registered, alias="production", version=2, user=alice).to_version_id
        finally:
            connection.close()

    def register():
        try:
            registering.set()
            return registry_register(team=acme, model=third, name="iris", user=alice).version
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        moved, registered_as = pool.submit(move), pool.submit(register)
        assert moved.result(timeout=30) and registered_as.result(timeout=30) == 3
