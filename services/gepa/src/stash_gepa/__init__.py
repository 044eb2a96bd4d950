"""The gepa service: evolves a SKILL.md with GEPA, using a reward model as the metric."""
