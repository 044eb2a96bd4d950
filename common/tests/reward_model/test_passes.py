"""The one-pass plan: which actions share the pass over the trace's last example, which get a window."""

from stash_common.reward_model.passes import TracePass, plan_pass


def test_prefixes_share_one_pass_cut_after_the_last_covered_token() -> None:
    plan = plan_pass([[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6]], max_length=8)

    assert plan == TracePass((1, 2, 3, 4, 5, 6), {0: 1, 1: 3, 2: 5}, ())


def test_an_action_whose_tokens_are_not_a_prefix_gets_its_own_window() -> None:
    # Action 1 ended with a token that merges with what follows it in the later examples.
    plan = plan_pass([[1, 2], [1, 2, 9], [1, 2, 3, 4, 5]], max_length=8)

    assert (plan.positions, plan.windows) == ({0: 1, 2: 4}, (1,))


def test_actions_past_the_token_limit_get_windows_and_the_pass_stops_at_the_last_that_fits() -> None:
    plan = plan_pass([[1, 2], [1, 2, 3], [1, 2, 3, 4, 5]], max_length=3)

    assert plan == TracePass((1, 2, 3), {0: 1, 1: 2}, (2,))


def test_a_trace_without_actions_plans_nothing() -> None:
    assert plan_pass([], max_length=8) == TracePass((), {}, ())
