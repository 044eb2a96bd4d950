"""The published ScorerService: every RPC is declared and answers UNIMPLEMENTED naming itself and its issue."""

import pytest
from google.protobuf.descriptor import MethodDescriptor

from stash.rm.v1 import scorer_pb2
from stash_common.errors import Code, Unimplemented
from stash_scorer.api import ScorerServicer

SERVICE = scorer_pb2.DESCRIPTOR.services_by_name["ScorerService"]


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda method: method.name)
def test_every_rpc_answers_unimplemented_naming_the_rpc_and_its_issue(method: MethodDescriptor) -> None:
    request = getattr(scorer_pb2, method.input_type.name)()

    with pytest.raises(Unimplemented, match=rf"^ScorerService\.{method.name} is not built yet: .*issue 12$") as raised:
        getattr(ScorerServicer(), method.name)(request, None)

    assert raised.value.code == Code.UNIMPLEMENTED
