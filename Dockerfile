# Tuneboard: one image for the web process (gunicorn), the Celery workers and beat.
# docker-compose.yml builds it once (service "web") and tags it tuneboard:latest.
# One of the supported Pythons (3.11–3.13, see requires-python): the image is built and tested
# on 3.11, the version CI runs; tests/unit/test_python_selection.py keeps it in the range.
FROM python:3.11-slim

# PYTHONPATH: run the code from /app (templates/ and static/ are found next to webapp/),
# not from the copy pip puts in site-packages.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    TUNEBOARD_VAR_DIR=/app/var

WORKDIR /app

# Dependencies first, in their own layer: TensorFlow is large and pyproject.toml changes
# far less often than the code. The empty package folders make this an install of the
# pinned dependencies only; the package itself is installed again below with the code.
COPY pyproject.toml ./
RUN mkdir webapp experiments workers \
    && pip install --no-cache-dir . \
    && rm -rf webapp experiments workers build *.egg-info

# GPU workers need TensorFlow's CUDA libraries (several GB, so off by default):
#   docker compose build --build-arg TENSORFLOW_CUDA=true
ARG TENSORFLOW_CUDA=false
RUN if [ "$TENSORFLOW_CUDA" = "true" ]; then \
        pip install --no-cache-dir "tensorflow[and-cuda]==2.21.0"; \
    fi

COPY manage.py ./
COPY webapp/ webapp/
COPY experiments/ experiments/
COPY workers/ workers/
COPY templates/ templates/
COPY static/ static/
RUN pip install --no-cache-dir --no-deps . \
    && rm -rf build *.egg-info

RUN useradd --create-home --uid 1000 --user-group tuneboard \
    && mkdir -p /app/var \
    && chown tuneboard:tuneboard /app/var
USER tuneboard

# Static files are served by WhiteNoise from $TUNEBOARD_VAR_DIR/staticfiles. Settings refuse to
# load without SECRET_KEY; collectstatic signs nothing, so this command alone gets a throwaway
# key (a RUN variable, not an ENV: it is not in the image and the containers must bring theirs).
RUN SECRET_KEY=collectstatic-at-build-time-only-never-used-to-sign-anything-9f3Kq7 python manage.py collectstatic --noinput

EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "120"]
