"""The one validation layer pages and the API share: one module per area, mirroring views/."""
