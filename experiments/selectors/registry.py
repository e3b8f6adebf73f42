"""Reads of the model registry: a team's registered models, and what a reference such as
`digits@production` or `digits/3` names."""

import re

from experiments.errors import TuneboardError
from experiments.models import ModelAlias, ModelVersion, Team

# "<registered model>@<alias>" or "<registered model>/<version>"
REFERENCE = re.compile(r"^(?P<name>[-a-zA-Z0-9_]+)(?:@(?P<alias>[-a-zA-Z0-9_]+)|/(?P<version>\d+))$")


class RegistryReferenceError(TuneboardError):
    """A reference that names no version of the team's registry; str(exc) says why."""


def registry_reference_resolve(*, team: Team, reference: str) -> ModelVersion:
    """The version `name@alias` or `name/N` points at in the team's registry (the trained model
    is `.trained_model`), or RegistryReferenceError with a message for a person."""
    match = REFERENCE.match((reference or "").strip())
    if match is None:
        raise RegistryReferenceError(f"{reference!r} is not a registry reference; write <registered model>@<alias> "
                                     "(e.g. digits@production) or <registered model>/<version> (e.g. digits/3).")
    name, alias, version = match["name"], match["alias"], match["version"]
    if alias:
        found = (ModelAlias.objects.select_related("version__trained_model", "version__registered_model")
                 .filter(registered_model__team=team, registered_model__name=name, name=alias).first())
        if found is None:
            raise RegistryReferenceError(f"The registered model {name!r} has no alias {alias!r} in this team.")
        return found.version
    found = (ModelVersion.objects.select_related("trained_model", "registered_model")
             .filter(registered_model__team=team, registered_model__name=name, version=int(version)).first())
    if found is None:
        raise RegistryReferenceError(f"The registered model {name!r} has no version {version} in this team.")
    return found
