# `make protos` regenerates protos/gen/python from protos/stash/rm/v1/*.proto (see protos/README.md).

PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

.PHONY: protos

protos:
	$(PYTHON) protos/generate.py
