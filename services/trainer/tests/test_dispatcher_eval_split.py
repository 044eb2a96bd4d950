"""The frozen task-group evaluation split of an input version 3 model, as the dispatcher prepares a launch."""

from stash_trainer.dispatcher import eval_split, mark_evaluated
from stash_trainer.evaluator.corpus import task_group
from stash_trainer.pairs.inputs import SourceTrace
from support.steps import SUPPORT, build_steps


def _trace(trace_id: str, request: str) -> SourceTrace:
    specs = [spec if spec[0] != "user" or index != 1 else ("user", request) for index, spec in enumerate(SUPPORT)]
    return SourceTrace(trace_id, build_steps(trace_id, specs), (), ())


TRACES = [_trace(f"{group}-{n}", f"Refund order {group}") for group in "abcd" for n in range(3)]


def test_a_first_launch_holds_out_whole_task_groups_the_same_for_the_same_seed() -> None:
    groups, held = eval_split(TRACES, None, "0:model-1")

    assert len(groups) == 1
    assert held == sorted(trace.id for trace in TRACES if task_group(trace) == groups[0])
    assert len(held) == 3  # all three traces of the group, none of another
    assert eval_split(TRACES, None, "0:model-1") == (groups, held)


def test_a_retry_reuses_the_stored_groups_whatever_the_seed() -> None:
    stored = [task_group(TRACES[-1])]

    groups, held = eval_split(TRACES, stored, "another seed")

    assert (groups, held) == (stored, ["d-0", "d-1", "d-2"])


def test_the_report_marks_kept_pairs_of_held_out_traces_as_evaluated_not_trained() -> None:
    feedback = (
        {"trace_id": "a-0", "included_in_training": True},
        {"trace_id": "d-0", "included_in_training": True},
        {"trace_id": "d-1", "included_in_training": False},
    )

    marked = mark_evaluated(feedback, ["d-0", "d-1", "d-2"])

    assert marked is not None
    assert [(item["included_in_training"], item["included_in_evaluation"]) for item in marked] == [
        (True, False),
        (False, True),
        (False, False),
    ]
    assert mark_evaluated(None, ["d-0"]) is None
