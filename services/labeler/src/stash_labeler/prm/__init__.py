"""The trajectory process reward model (PRM): failure patterns in an agent's sequence of tool calls.

Derive events from a trace's steps, keep a task's trailing window, detect patterns, and turn the
most severe new one into a course correction:

    log = TaskLog(task_id)
    for item in events_from_steps(trace.steps):
        log.append(item.event)
        matches = log.analyze()
        correction = log.emit_correction([match.pattern for match in matches])

With `PRMConfig(strategy="rules+ml")`, `LLMTrajectoryClassifier.classify` adds patterns an LLM sees
and `merge_patterns` puts the rules first. `ProcessModel` is that whole model as the labeler runs it,
over a live window or a stored trace. The package is pure: what it finds is kept by `store.py`.
"""

from stash_labeler.prm.calls import call_signature, describe_call
from stash_labeler.prm.classifier import (
    LLMCompleter,
    LLMTrajectoryClassifier,
    build_classify_prompt,
    merge_patterns,
    parse_classify_response,
)
from stash_labeler.prm.commands import Verb, classify_command
from stash_labeler.prm.config import PRMConfig
from stash_labeler.prm.corrections import SUGGESTIONS, CourseCorrection, next_correction
from stash_labeler.prm.detectors import (
    DETECTORS,
    analyze,
    detect_context_thrash,
    detect_expansion_drift,
    detect_ping_pong,
    detect_repetition_loop,
    detect_stuck_on_test,
)
from stash_labeler.prm.events import StepEvent, TrajectoryEvent, events_from_steps, steps_covered
from stash_labeler.prm.patterns import PATTERN_KINDS, PATTERN_NAMES, Pattern, PatternMatch, PatternName, Taxonomy
from stash_labeler.prm.process_model import Finding, ProcessModel
from stash_labeler.prm.trajectory import MAX_EVENTS, TaskLog

__all__ = [
    "DETECTORS",
    "MAX_EVENTS",
    "PATTERN_KINDS",
    "PATTERN_NAMES",
    "SUGGESTIONS",
    "CourseCorrection",
    "Finding",
    "LLMCompleter",
    "LLMTrajectoryClassifier",
    "PRMConfig",
    "Pattern",
    "PatternMatch",
    "PatternName",
    "ProcessModel",
    "StepEvent",
    "TaskLog",
    "Taxonomy",
    "TrajectoryEvent",
    "Verb",
    "analyze",
    "build_classify_prompt",
    "call_signature",
    "classify_command",
    "describe_call",
    "detect_context_thrash",
    "detect_expansion_drift",
    "detect_ping_pong",
    "detect_repetition_loop",
    "detect_stuck_on_test",
    "events_from_steps",
    "merge_patterns",
    "next_correction",
    "parse_classify_response",
    "steps_covered",
]
