"""Reads for pages, the API and notifications, one module per area (mirroring services/).
Everything is scoped to a team. Import from the submodule."""
