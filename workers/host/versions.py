"""The versions of what a worker runs, recorded on the Workers page and on every model."""

import platform
from importlib import metadata

PACKAGES = ("tensorflow", "jax", "jaxlib", "keras", "keras-tuner", "celery", "django", "numpy", "scipy", "tuneboard")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions
