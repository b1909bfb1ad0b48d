"""The worker's protocol loop (torch-free): one reply per request, errors as data."""

from __future__ import annotations

import io

from equivalence_samples import CASE, ITEM, ok

from overlay.equivalence import protocol
from overlay.equivalence.protocol import (
    ErrorReply,
    InitReply,
    InitRequest,
    ItemResult,
    ListReply,
    ListRequest,
    QuitRequest,
    RunReply,
    RunRequest,
    Stage,
)
from overlay.equivalence.worker import serve
from overlay.equivalence.worker.serve import InputError, error_info


class ScriptedRunner:
    def __init__(self, refuse: Exception) -> None:
        self.seen: list[RunRequest] = []
        self.refuse = refuse

    def init(self, request: InitRequest) -> InitReply:
        raise self.refuse

    def cases(self) -> ListReply:
        return ListReply((CASE,), ())

    def run(self, request: RunRequest) -> ItemResult:
        self.seen.append(request)
        return ok()


def _answers(runner: ScriptedRunner, lines: list[str]) -> list[protocol.Reply]:
    replies = io.StringIO()
    serve.serve(io.StringIO("\n".join(lines) + "\n"), replies, runner)
    return [protocol.decode_reply(line) for line in replies.getvalue().splitlines()]


def test_worker_serve_answers_each_request_and_stops_at_quit() -> None:
    runner = ScriptedRunner(RuntimeError("cannot load m.py"))
    lines = [
        protocol.encode(ListRequest()),
        "",
        protocol.encode(RunRequest(ITEM, fixes=(2,))),
        protocol.encode(InitRequest(models="m.py")),
        "garbage",
        protocol.encode(QuitRequest()),
        protocol.encode(ListRequest()),  # after quit: never answered
    ]
    answers = _answers(runner, lines)
    assert [type(a) for a in answers] == [ListReply, RunReply, ErrorReply, ErrorReply]
    assert runner.seen == [RunRequest(ITEM, fixes=(2,))]
    init_error, bad_line = answers[2], answers[3]
    assert isinstance(init_error, ErrorReply) and isinstance(bad_line, ErrorReply)
    assert (init_error.error.type, init_error.error.stage) == ("RuntimeError", Stage.INIT)
    assert init_error.error.message == "cannot load m.py"
    assert (bad_line.error.type, bad_line.error.stage) == ("ProtocolError", Stage.REQUEST)


def test_a_bad_user_file_is_replied_as_an_input_error() -> None:
    runner = ScriptedRunner(InputError("invalid models file m.py:\nx: missing key(s) spec"))
    (answer,) = _answers(runner, [protocol.encode(InitRequest(models="m.py"))])
    assert isinstance(answer, ErrorReply)
    assert (answer.error.stage, answer.error.type) == (Stage.INPUT, "InputError")
    assert "x: missing key(s) spec" in answer.error.message


def test_a_wrapped_error_leads_with_its_root_cause() -> None:
    try:
        try:
            raise RuntimeError("grid_sampler rewrite only supports per-tensor int8 grids")
        except RuntimeError as inner:
            raise Exception("An error occurred when running the pass") from inner
    except Exception as outer:
        info = error_info(outer, Stage.LOWER)
    assert info.type == "Exception"
    assert info.first_line == (
        "Exception: RuntimeError: grid_sampler rewrite only supports per-tensor int8 grids"
    )
    assert "(raised as: An error occurred when running the pass)" in info.message
    assert error_info(ValueError("plain"), Stage.LOWER).message == "plain"


def test_messages_lose_what_differs_between_environments() -> None:
    prefix = serve._site_prefixes()[0]
    message = serve.normalise_message(f"at 0x7f3a9c2b10 in {prefix}/executorch/x.py")
    assert message == "at 0x? in <env>/executorch/x.py"
    assert len(serve.normalise_message("y" * 10_000)) == 4000
