# Tuneboard images, one Dockerfile, two targets:
#   (default, the last stage)   the web process (gunicorn), TensorFlow workers and beat.
#                               docker-compose.yml builds it once (service "web") and tags it
#                               tuneboard:latest.
#   --target worker-jax         a JAX GPU worker of the gpu-jax queue, without TensorFlow
#                               (Compose profile gpu-jax, tags it tuneboard-jax:latest).
# One of the supported Pythons (3.11–3.13, see requires-python): the image is built and tested
# on 3.11, the version CI runs; tests/unit/test_python_selection.py keeps it in the range.
FROM python:3.11-slim AS base

# PYTHONPATH: run the code from /app (templates/ and static/ are found next to webapp/),
# not from the copy pip puts in site-packages.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    TUNEBOARD_VAR_DIR=/app/var

WORKDIR /app

# var/serving exists in the image so a Compose volume mounted there starts owned by tuneboard.
RUN useradd --create-home --uid 1000 --user-group tuneboard \
    && mkdir -p /app/var/serving \
    && chown -R tuneboard:tuneboard /app/var

# Dependencies are installed in each target's own layer before the code: the backends are large
# and pyproject.toml changes far less often than the code. The empty package folders make that
# an install of the pinned dependencies only; the package itself is installed again with the code.
COPY pyproject.toml ./

# The application source, copied into each target after its dependencies.
FROM scratch AS source
WORKDIR /app
COPY manage.py ./
COPY webapp/ webapp/
COPY experiments/ experiments/
COPY workers/ workers/
COPY templates/ templates/
COPY static/ static/

# A JAX worker for NVIDIA GPUs: jax[cuda12] (CUDA libraries from PyPI; the host needs only the
# driver and the NVIDIA Container Toolkit), no TensorFlow. SavedModel and TFLite of the models it
# trains are made by a follow-up job on a TensorFlow worker of the cpu queue.
#   docker build --target worker-jax -t tuneboard-jax .
# JAX_EXTRA=jax builds the same worker with JAX's CPU wheels (for the cpu-jax queue).
FROM base AS worker-jax
ARG JAX_EXTRA=jax-cuda
RUN mkdir webapp experiments workers \
    && pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" \
    && pip install --no-cache-dir ".[$JAX_EXTRA,gp]" \
    && rm -rf webapp experiments workers build *.egg-info
COPY --from=source /app/ ./
RUN pip install --no-cache-dir --no-deps . \
    && rm -rf build *.egg-info
# KERAS_BACKEND: Keras reads it once, at import; the worker refuses TensorFlow's queues.
# XLA_PYTHON_CLIENT_PREALLOCATE=false: JAX would otherwise take 75 % of each GPU's memory in the
# first process that touches it, so a second worker child on the same GPU runs out of memory.
# Off, each child allocates what its trial needs. Alternatives (docs/how-to/gpus-and-tpus.md):
# XLA_CLIENT_MEM_FRACTION=.45 (preallocate that share per process instead; the older name
# XLA_PYTHON_CLIENT_MEM_FRACTION is still read) or XLA_PYTHON_CLIENT_ALLOCATOR=platform
# (allocate and free exactly what is used: smallest footprint, slow).
ENV KERAS_BACKEND=jax \
    XLA_PYTHON_CLIENT_PREALLOCATE=false
USER tuneboard
CMD ["celery", "-A", "webapp", "worker", "-Q", "gpu-jax", "--concurrency", "1", "--loglevel", "INFO", \
     "--hostname", "gpu-jax@%h"]

# The default target: web, TensorFlow workers (cpu, gpu, tpu queues) and beat.
FROM base AS tuneboard
# PyTorch's CPU build first (Optuna's Gaussian-process tuner): the gp extra then finds it installed.
RUN mkdir webapp experiments workers \
    && pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" \
    && pip install --no-cache-dir ".[tensorflow,gp]" \
    && rm -rf webapp experiments workers build *.egg-info

# GPU workers need TensorFlow's CUDA libraries (several GB, so off by default):
#   docker compose build --build-arg TENSORFLOW_CUDA=true
ARG TENSORFLOW_CUDA=false
RUN if [ "$TENSORFLOW_CUDA" = "true" ]; then \
        pip install --no-cache-dir "tensorflow[and-cuda]==2.21.0"; \
    fi

COPY --from=source /app/ ./
RUN pip install --no-cache-dir --no-deps . \
    && rm -rf build *.egg-info

USER tuneboard

# Static files are served by WhiteNoise from $TUNEBOARD_VAR_DIR/staticfiles. Settings refuse to
# load without SECRET_KEY; collectstatic signs nothing, so this command alone gets a throwaway
# key (a RUN variable, not an ENV: it is not in the image and the containers must bring theirs).
RUN SECRET_KEY=collectstatic-at-build-time-only-never-used-to-sign-anything-9f3Kq7 python manage.py collectstatic --noinput

EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "120"]
