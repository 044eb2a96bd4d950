"""The scorer service: scores every action of a trace with a trained reward model."""
