"""Preference pairs for reward-model training, built from selected traces, ratings, credit and feedback."""
