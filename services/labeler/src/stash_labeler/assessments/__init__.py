"""Fast-model assessments of a trace: section summaries and completion estimates, cached with leases."""

from stash_labeler.assessments.assessor import Assessor, Outcome
from stash_labeler.assessments.fast_model import MISSING_KEY, AnthropicFastModel, FastModel, ModelFailure

__all__ = ["MISSING_KEY", "AnthropicFastModel", "Assessor", "FastModel", "ModelFailure", "Outcome"]
