"""One module per REST resource; each router carries the full prefix so route templates are whole."""

API_PREFIX = "/api/v1/rm"
