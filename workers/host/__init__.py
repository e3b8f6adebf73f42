"""The worker host and process; imports nothing itself, so the main Celery process loads only the light parts
(shutdown, fleet, reaper, selection), never a backend."""
