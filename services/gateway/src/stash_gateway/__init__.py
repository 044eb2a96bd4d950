"""The gateway: the public REST API, bearer authentication and owner scoping in front of the services."""
