"""Reads of the model registry: registered models, their versions, aliases and moves, and what a reference such as
`digits@production` or `digits/3` names."""

import re

from django.db.models import Count, Max
from django.utils.text import slugify

from experiments.errors import TuneboardError
from experiments.models import AliasMove, ModelAlias, ModelVariant, ModelVersion, RegisteredModel, Team, TrainedModel
from experiments.presentation.serving_requests import serving_request
from experiments.serving.contract import contract_differences, model_contract, registered_contract

# "<registered model>@<alias>" or "<registered model>/<version>": the version in ASCII digits
# (\d is any Unicode digit, and int('٣') is 3) and nothing after it ($ allows a trailing newline).
REFERENCE = re.compile(r"(?P<name>[-a-zA-Z0-9_]+)(?:@(?P<alias>[-a-zA-Z0-9_]+)|/(?P<version>[0-9]+))\Z")
MAX_VERSION = 2**31 - 1  # the column's bound: a longer number names no version (not a database error)

VARIANT_LABELS = dict(ModelVariant.Method.choices)


class RegistryReferenceError(TuneboardError):
    """A reference that names no version of the team's registry; str(exc) says why."""


def registry_reference_resolve(*, team: Team, reference: str) -> ModelVersion:
    """The version `name@alias` or `name/N` points at in the team's registry (the trained model
    is `.trained_model`), or RegistryReferenceError with a message for a person."""
    match = REFERENCE.match((reference or "").strip())
    if match is None:
        raise RegistryReferenceError(f"{reference!r} is not a registry reference; write <registered model>@<alias> "
                                     "(e.g. digits@production) or <registered model>/<version> with the digits 0-9 "
                                     "(e.g. digits/3).")
    name, alias, version = match["name"], match["alias"], match["version"]
    if alias:
        found = (ModelAlias.objects.select_related("version__trained_model", "version__registered_model")
                 .filter(registered_model__team=team, registered_model__name=name, name=alias).first())
        if found is None:
            raise RegistryReferenceError(f"The registered model {name!r} has no alias {alias!r} in this team.")
        return found.version
    found = (ModelVersion.objects.select_related("trained_model", "registered_model")
             .filter(registered_model__team=team, registered_model__name=name, version=int(version)).first()
             if len(version) <= len(str(MAX_VERSION)) and int(version) <= MAX_VERSION else None)
    if found is None:
        raise RegistryReferenceError(f"The registered model {name!r} has no version {version} in this team.")
    return found


def team_registered_models(*, team: Team) -> list[RegisteredModel]:
    """The team's registered models, each with `version_count`, `latest_version` and `alias_rows`
    (name -> version number), in three queries however many there are."""
    registered = list(RegisteredModel.objects.filter(team=team)
                      .annotate(version_count=Count("versions"), latest_version=Max("versions__version"))
                      .order_by("name"))
    aliases: dict[int, list] = {}
    for row in (ModelAlias.objects.filter(registered_model__team=team).order_by("name")
                .values("registered_model_id", "name", "version__version")):
        aliases.setdefault(row["registered_model_id"], []).append({"name": row["name"],
                                                                   "version": row["version__version"]})
    contracts = registered_model_contracts(registered=registered)
    for item in registered:
        item.alias_rows = aliases.get(item.id, [])
        item.contract = contracts[item.id]
    return registered


def _recorded(registered: RegisteredModel) -> bool:
    return bool(registered.output_keys) and all(spec.get("name") for spec in registered.input_signature or [])


def registered_model_contracts(*, registered: list[RegisteredModel]) -> dict[int, dict]:
    """Each registered model's serving contract ({"inputs": [{name, shape, dtype}], "outputs":
    [key]}, experiments/serving/contract.py), by id. Rows made before keys were recorded adopt
    those of their first version, read for all of them in one query."""
    older = [r.id for r in registered if not _recorded(r)]
    firsts = dict(ModelVersion.objects.filter(registered_model_id__in=older, version=1)
                  .values_list("registered_model_id", "trained_model__signature")) if older else {}
    return {r.id: registered_contract(r.input_signature, r.output_keys,
                                      model_contract(firsts[r.id]) if r.id in firsts else None)
            for r in registered}


def registered_model_contract(*, registered: RegisteredModel) -> dict:
    """The contract every version of `registered` serves under (and a new one must)."""
    return registered_model_contracts(registered=[registered])[registered.id]


def team_registered_model(*, team: Team, registered_model_id: int) -> RegisteredModel | None:
    return RegisteredModel.objects.filter(team=team, pk=registered_model_id).select_related("created_by").first()


def registered_model_versions(*, registered: RegisteredModel, contract: dict | None = None) -> list[ModelVersion]:
    """Its versions, newest first, with their trained model (test metrics, status), `alias_names`
    and, given the registered model's `contract`, `contract_differences`: how a version serves
    otherwise ([] for all but versions registered before the keys were compared)."""
    versions = list(registered.versions.select_related("trained_model", "trained_model__dataset", "created_by",
                                                       "variant")
                    .order_by("-version"))
    names: dict[int, list[str]] = {}
    for version_id, name in ModelAlias.objects.filter(registered_model=registered).values_list("version_id", "name"):
        names.setdefault(version_id, []).append(name)
    for version in versions:
        version.alias_names = sorted(names.get(version.id, []))
        version.contract_differences = [] if contract is None else contract_differences(
            contract, model_contract(version.trained_model.signature))
    return versions


def registered_model_aliases(*, registered: RegisteredModel) -> list[ModelAlias]:
    return list(registered.aliases.select_related("version").order_by("name"))


def registered_model_moves(*, registered: RegisteredModel, limit: int = 200) -> list[AliasMove]:
    """Its alias moves, newest first (who, when, from, to), each with `can_roll_back`: it is its
    alias's latest move (as services.registry.registry_alias_rollback requires)."""
    moves = list(registered.alias_moves.select_related("from_version", "to_version", "user")
                 .order_by("-created", "-id")[:limit])
    seen: set[str] = set()
    for move in moves:
        move.can_roll_back = move.alias not in seen
        seen.add(move.alias)
    return moves


def registered_model_detail(*, registered: RegisteredModel) -> dict:
    """What the registered model's page and the API's detail show: `versions` (each with
    `contract_differences`), `aliases`, `moves`, its `contract` and `serving`, the TF Serving REST
    request that works for every version (experiments/presentation/serving_requests.py)."""
    contract = registered_model_contract(registered=registered)
    aliases = registered_model_aliases(registered=registered)
    return {"versions": registered_model_versions(registered=registered, contract=contract), "aliases": aliases,
            "moves": registered_model_moves(registered=registered), "contract": contract,
            "serving": serving_request(name=registered.name, contract=contract, aliases=[a.name for a in aliases])}


def models_registry_entries(*, model_ids: list[int]) -> dict[int, list[dict]]:
    """For each trained model id, the versions it is ({registered_model_id, name, version, aliases, variant: the
    quantized variant's method or "", variant_label}), in one query (a LEFT JOIN on the aliases): the
    leaderboard's badges."""
    entries: dict[int, dict[int, dict]] = {}
    rows = (ModelVersion.objects.filter(trained_model_id__in=model_ids)
            .values("id", "trained_model_id", "version", "registered_model_id", "registered_model__name",
                    "aliases__name", "variant__method")
            .order_by("registered_model__name", "aliases__name"))
    for row in rows:
        entry = entries.setdefault(row["trained_model_id"], {}).setdefault(row["id"], {
            "registered_model_id": row["registered_model_id"], "name": row["registered_model__name"],
            "version": row["version"], "aliases": [], "variant": row["variant__method"] or "",
            "variant_label": VARIANT_LABELS.get(row["variant__method"], "")})
        if row["aliases__name"]:
            entry["aliases"].append(row["aliases__name"])
    return {model_id: list(versions.values()) for model_id, versions in entries.items()}


def model_registry_entries(*, model: TrainedModel) -> list[dict]:
    """The versions one trained model is, with their aliases (the model page)."""
    return models_registry_entries(model_ids=[model.id]).get(model.id, [])


def register_suggestion(*, team: Team, model: TrainedModel) -> dict:
    """What the Register form proposes for `model`: the team's registered model whose serving
    contract it keeps (one holding a model of the same dataset first), else a new name after its
    dataset; and every name of the team to choose from."""
    registered = list(RegisteredModel.objects.filter(team=team).order_by("name"))
    taken = {v.registered_model_id for v in model.registry_versions.all()}
    contracts, own = registered_model_contracts(registered=registered), model_contract(model.signature)
    fitting = [r for r in registered if r.id not in taken and r.task == model.dataset.task
               and own["inputs"] and not contract_differences(contracts[r.id], own)]
    same_data = set(ModelVersion.objects.filter(registered_model__in=fitting, trained_model__dataset=model.dataset_id)
                    .values_list("registered_model_id", flat=True))
    fitting.sort(key=lambda r: r.id not in same_data)
    return {"name": fitting[0].name if fitting else (slugify(model.dataset.name) or f"dataset-{model.dataset_id}"),
            "names": [r.name for r in registered if r.id not in taken]}


def registered_model_move(*, registered: RegisteredModel, move_id: int) -> AliasMove | None:
    return registered.alias_moves.filter(pk=move_id).first()
