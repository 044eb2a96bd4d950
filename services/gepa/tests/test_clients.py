"""The gepa service's clients: ingest's annotations become comments that keep their author."""

from stash.rm.v1 import common_pb2
from stash_gepa.clients import comment_of
from stash_gepa.examples import Comment


def test_a_comment_keeps_its_author_s_name_and_its_label_error_flag() -> None:
    annotation = common_pb2.Annotation(
        id="a1",
        trace_id="t1",
        step_id="s4",
        comment="no refund policy check",
        quote=common_pb2.Quote(text="refund"),
        label_error=True,
        author_id="u-rita",
        author_name="rita",
    )

    assert comment_of(annotation) == Comment(
        step_id="s4", text="no refund policy check", quote="refund", label_error=True, author="rita"
    )
