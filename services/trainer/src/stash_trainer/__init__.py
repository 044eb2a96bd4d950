"""The trainer service: builds preference pairs and trains reward models."""
