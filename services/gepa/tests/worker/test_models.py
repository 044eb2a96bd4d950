"""LiteLLM calls through the real client against the stand-in server: which failures end the run."""

from collections.abc import Iterator

import pytest
from fakes.llm_server import FakeLLM

from stash_gepa.worker.models import ChatModel, ProviderError, ProviderUnavailable
from support.processes import free_port

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    yield fake
    fake.stop()


def _model(api_base: str | None, name: str = "openai/stand-in") -> ChatModel:
    return ChatModel("task", name, api_base, "task_model of the GEPA run")


def test_a_reply_comes_back_as_text(llm: FakeLLM) -> None:
    llm.reply = lambda _path, body: f"echo {body['messages'][-1]['content']}"

    assert _model(f"{llm.url}/v1").complete(MESSAGES) == "echo hello"


def test_a_refused_request_is_that_calls_failure(llm: FakeLLM) -> None:
    llm.fail_status = 400

    with pytest.raises(ProviderError, match=r"^the task model openai/stand-in failed: BadRequestError"):
        _model(f"{llm.url}/v1").complete(MESSAGES)


@pytest.mark.parametrize(("status", "hint"), [(401, "API key"), (404, "model's name")])
def test_refused_credentials_or_an_unknown_model_end_the_run(llm: FakeLLM, status: int, hint: str) -> None:
    llm.fail_status = status

    with pytest.raises(ProviderUnavailable) as raised:
        _model(f"{llm.url}/v1").complete(MESSAGES)

    assert f"at {llm.url}/v1 cannot be used" in raised.value.message
    assert hint in raised.value.message and raised.value.message.endswith("or set task_model of the GEPA run")


def test_a_server_that_is_not_there_ends_the_run_saying_so() -> None:
    with pytest.raises(ProviderUnavailable, match="check that the server is running and reachable"):
        _model(f"http://127.0.0.1:{free_port()}/v1").complete(MESSAGES)


def test_a_provider_without_its_key_is_refused_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    with pytest.raises(ProviderUnavailable) as raised:
        _model(None, "anthropic/claude-haiku-4-5").check_credentials()

    assert raised.value.message == (
        "the task model anthropic/claude-haiku-4-5 needs ANTHROPIC_API_KEY in the gepa service's environment;"
        " set it there, or choose another model with task_model of the GEPA run"
    )


def test_a_server_behind_an_api_base_needs_no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    _model("http://vllm:8000/v1").check_credentials()
