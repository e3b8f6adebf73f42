"""Function-based views, one module per area. Each object is fetched through a
`_get_<thing>_for_user` helper that answers 404 for other teams' objects."""
