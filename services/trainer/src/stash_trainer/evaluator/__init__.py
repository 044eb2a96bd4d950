"""The shared evaluator's data: consent, candidate comparisons, independent review, frozen benchmarks."""
