"""The model registry's writes: register a version, set, remove or roll back aliases; every move is kept, audited
and asks for a serving export, so TF Serving follows the registry."""

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import AliasMove, ModelAlias, ModelVariant, ModelVersion, RegisteredModel, Team, TrainedModel
from experiments.selectors.registry import registered_model_contract
from experiments.services.audit import audit_record
from experiments.services.serving_exports import serving_export_request
from experiments.serving.contract import contract_differences, model_contract, older_names


class RegistryError(TuneboardError):
    """Why a registry change is refused; str(exc) is shown to the user (pages and API alike)."""


def _check_registrable(model: TrainedModel, team: Team) -> dict:
    """The model's serving contract, or why it cannot be registered."""
    if model.team_id != team.id:
        raise RegistryError("The model belongs to another team.")
    if model.status != TrainedModel.Status.COMPLETED:
        raise RegistryError(f"{model} has not completed ({model.get_status_display().lower()}); only a finished "
                            "model can be registered.")
    contract = model_contract(model.signature)
    if not contract["inputs"]:
        raise RegistryError(f"{model} has no recorded input signature (it was made before signatures were kept); "
                            "retrain or promote it again to register it.")
    return contract


def _refusal(model: TrainedModel, name: str, differences: list[str], older: bool) -> str:
    why = (" (A SavedModel exported before Tuneboard named its inputs input_0, input_1, ... and its outputs "
           "output_0, ... serves under its Keras layers' names.)" if older else "")
    return (f"{model} cannot be a version of {name}: " + "; ".join(differences)
            + f". Every version of {name} must serve under the signature of its first (TF Serving serves them under "
              f"one name, and a client that names the inputs calls every version alike).{why} Register it under "
              "another name.")


def _audit(verb: str, registered: RegisteredModel, changes: dict, user, via: dict | None) -> None:
    """`user` is the row's actor wherever the change is made (a recipe's run registers in a worker,
    outside any request); `via` names what made it for them ({"recipe": ..., "run": ...})."""
    audit_record(verb=verb, obj=registered, team_id=registered.team_id, changes={**changes, **(via or {})},
                 actor=user)


@transaction.atomic
def registry_register(*, team: Team, model: TrainedModel, name: str, user, description: str = "",
                      via: dict | None = None, variant_id: int | None = None) -> ModelVersion:
    """`model` (or its made quantized variant `variant_id`, whose signature is the model's) as the next version of
    the registered model `name`, refused when its task or serving contract differs, so every version serves alike."""
    contract = _check_registrable(model, team)
    variant = None
    if variant_id is not None:
        variant = model.variants.filter(pk=variant_id, status=ModelVariant.Status.COMPLETED).first()
        if variant is None:
            raise RegistryError(f"{model} has no made quantized variant {variant_id}; make one on its page first.")
    # The team row's lock serialises registrations in the team: two first registrations of one
    # name cannot both create it, and version numbers count up without gaps or clashes.
    Team.objects.select_for_update().get(pk=team.id)
    dataset = model.dataset
    registered = RegisteredModel.objects.filter(team=team, name=name).first()
    if registered is None:
        registered = RegisteredModel.objects.create(team=team, name=name, task=dataset.task,
                                                    dataset_kind=dataset.kind, input_signature=contract["inputs"],
                                                    output_keys=contract["outputs"], created_by=user)
    else:
        existing = registered.versions.filter(trained_model=model, variant=variant).first()
        if existing is not None:
            what = f"{model}" if variant is None else f"{variant}"
            raise RegistryError(f"{what} is already version {existing.version} of {name}.")
        expected = registered_model_contract(registered=registered)
        differences = contract_differences(expected, contract)
        if dataset.task != registered.task:
            differences.insert(0, f"it does {dataset.task}, not {registered.task}")
        if differences:
            raise RegistryError(_refusal(model, name, differences, older_names(expected, contract)))
        if (registered.input_signature, registered.output_keys) != (expected["inputs"], expected["outputs"]):
            # A row from before keys were recorded keeps the ones it adopted from its first version.
            registered.input_signature, registered.output_keys = expected["inputs"], expected["outputs"]
            registered.save(update_fields=["input_signature", "output_keys"])
    last = registered.versions.aggregate(v=Max("version"))["v"] or 0
    version = ModelVersion.objects.create(registered_model=registered, version=last + 1, trained_model=model,
                                          variant=variant, description=description, created_by=user)
    _audit("registry.register", registered, {"version": version.version, "model": model.id,
                                             **({"variant": variant.method} if variant else {})}, user, via)
    # A new version is served too (by number, /versions/N, before any alias points at it).
    serving_export_request(team=team, reason=f"version:{name}/{version.version}", user=user)
    return version


def _locked(registered: RegisteredModel) -> RegisteredModel:
    """The registered model's row lock, taken after the team's in the order every registry write uses, so an alias move
    and a registration cannot deadlock."""
    Team.objects.select_for_update().only("pk").get(pk=registered.team_id)
    return RegisteredModel.objects.select_for_update().get(pk=registered.pk)


def _move(*, registered: RegisteredModel, alias: str, to: ModelVersion | None, user,
          rollback_of: AliasMove | None = None, via: dict | None = None) -> AliasMove:
    current = ModelAlias.objects.filter(registered_model=registered, name=alias).select_related("version").first()
    if to is None:
        current.delete()
    elif current is None:
        ModelAlias.objects.create(registered_model=registered, name=alias, version=to)
    else:
        ModelAlias.objects.filter(pk=current.pk).update(version=to, updated=timezone.now())
    move = AliasMove.objects.create(registered_model=registered, alias=alias,
                                    from_version=current.version if current else None, to_version=to,
                                    rollback_of=rollback_of, user=user)
    verb = "registry.rollback" if rollback_of else ("registry.alias_remove" if to is None else "registry.alias_set")
    _audit(verb, registered, {"alias": alias, "from": move.from_version.version if move.from_version else None,
                              "to": to.version if to else None}, user, via)
    serving_export_request(team=registered.team, reason=f"alias:{registered.name}@{alias}", user=user)
    return move


@transaction.atomic
def registry_alias_set(*, registered: RegisteredModel, alias: str, version: int, user,
                       via: dict | None = None) -> AliasMove:
    """Point `alias` (made if new) at version `version`; the move is kept."""
    registered = _locked(registered)
    target = registered.versions.filter(version=version).first()
    if target is None:
        raise RegistryError(f"{registered.name} has no version {version}.")
    current = ModelAlias.objects.filter(registered_model=registered, name=alias).first()
    if current is not None and current.version_id == target.id:
        raise RegistryError(f"{registered.name}@{alias} already points at version {version}.")
    return _move(registered=registered, alias=alias, to=target, user=user, via=via)


@transaction.atomic
def registry_alias_remove(*, registered: RegisteredModel, alias: str, user) -> AliasMove:
    registered = _locked(registered)
    if not ModelAlias.objects.filter(registered_model=registered, name=alias).exists():
        raise RegistryError(f"{registered.name} has no alias {alias!r}.")
    return _move(registered=registered, alias=alias, to=None, user=user)


@transaction.atomic
def registry_alias_rollback(*, registered: RegisteredModel, move_id: int, user) -> AliasMove:
    """Undo a move: the alias goes back to the move's from_version (or is removed, when that move
    made it), recorded as a new move. Only the alias's latest move: undoing an older one would
    also undo, unseen, the moves made since."""
    registered = _locked(registered)
    move = AliasMove.objects.filter(registered_model=registered, pk=move_id).select_related(
        "from_version", "to_version").first()
    if move is None:
        raise RegistryError(f"{registered.name} has no alias move {move_id}.")
    latest = AliasMove.objects.filter(registered_model=registered, alias=move.alias).order_by("-created", "-id")[0]
    if latest.id != move.id:
        current = ModelAlias.objects.filter(registered_model=registered, name=move.alias).select_related(
            "version").first()
        now = f"version {current.version.version}" if current else "removed"
        raise RegistryError(f"{registered.name}@{move.alias} has moved since (it is now {now}); roll back its "
                            "latest move instead.")
    return _move(registered=registered, alias=move.alias, to=move.from_version, user=user, rollback_of=move)
