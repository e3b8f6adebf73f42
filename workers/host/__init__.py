"""The worker host and process: the Keras backend and its queues, devices and placement, compute
settings, the heartbeat thread, graceful shutdown, registration in the fleet, the reaper, the
environment and versions recorded on every run. Imports nothing here: the main Celery process
loads only the light parts (shutdown, fleet, reaper, selection), never a backend."""
