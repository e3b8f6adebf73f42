"""The test suite's settings: webapp.settings with a signing key of its own.

webapp.settings refuses to load without SECRET_KEY while DEBUG is off; the key goes into the
environment (not only into the settings) so the worker processes the tests start inherit it."""

import os

from tests.parallel import isolate

isolate()  # an xdist process's own Redis database and var folder (tests/parallel.py)
os.environ.setdefault("SECRET_KEY", "tests-only-signing-key-" + "x7Qp2Lr9Vb4Nz8Kd3Hs6Wf1Yc5Tg0Ju" * 2)

from webapp.settings import *  # noqa: E402,F401,F403

# The personas' passwords are hashed in most tests (and checked at every log-in): the default
# hasher spends ~0.2 s of CPU each, minutes over the suite. Deployments keep the default.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
