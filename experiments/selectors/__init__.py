"""Reads for pages, the API, notifications and workers, one module per area (mirroring services/).
Everything is scoped to a team. Import from the submodule."""
