"""The `jupyter_gpuiter` comm (docs/protocol.md): messages, the verdict log, `sync`, and a real gpuiter kernel
opening the comm and answering a frontend that attaches late."""

from __future__ import annotations

import json

import numpy as np
import pytest

import jupyter_gpuiter as gi
from jupyter_gpuiter.front import comm
from jupyter_gpuiter.lang.errors import CompileError
from tests.support.kernel_client import iopub_until_idle

VERDICT_FIELDS = {"type", "version", "name", "mode", "passed", "exhaustive", "tests", "failures", "epsilon", "delta",
                  "sentence", "counterexample", "error", "seconds", "at"}


def _compile_error(source: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        gi.compile(source)
    return info.value


def test_error_message_is_a_verdict_with_the_error():
    e = _compile_error("def broken(x):\n    return x + y\n")
    msg = json.loads(json.dumps(comm.error_message("broken", "traditional", e, {"compile": 0.01})))
    assert set(msg) == VERDICT_FIELDS
    assert msg["type"] == "verdict" and msg["passed"] is False and msg["tests"] == 0 and msg["epsilon"] is None
    assert msg["error"] == {"kind": "unknown-name", "line": 2, "col": e.col, "message": e.message}
    assert msg["sentence"].startswith("unknown-name at line 2, column ")


def test_verdict_message_has_every_field():
    v = gi.verify("def f(x):\n    return x * 2\n", "def f(x):\n    return x + x\n", tests=100)
    msg = json.loads(json.dumps(comm.verdict_message("f", "serial", v, {"compile": 0.1})))
    assert set(msg) == VERDICT_FIELDS and msg["passed"] is True and msg["at"] > 0


def test_row_counterexample_message_shows_the_rows_around_the_failing_element():
    naive, real = "def sm(x):\n    e = exp(x)\n    return e / sum(e)\n", "def sm(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n"
    v = gi.verify(naive, real, tests=300, row_lengths=(33,))
    cx = v.counterexample
    msg = json.loads(json.dumps(comm.verdict_message("sm", "serial", v, {"compile": 0.1})))["counterexample"]
    lo, hi = cx.window()
    assert msg["row"] == {"length": cx.row_length, "position": cx.position, "start": lo}
    shown = [None if not np.isfinite(e) else float(e) for e in cx.inputs["x"][lo:hi]]
    assert msg["inputs"]["x"] == shown and len(shown) == hi - lo <= cx.row_length


def test_function_name():
    assert comm.function_name("# c\ndef  my_fn(x):\n    return y\n") == "my_fn"
    assert comm.function_name("return 1") == "cell"


def test_outside_a_kernel_nothing_is_sent_or_logged():
    before = len(comm._log)
    assert comm.send({"type": "verdict", "version": 1, "name": "x"}) is False
    assert len(comm._log) == before


class _FakeComm:
    def __init__(self):
        self.sent = []

    def send(self, data):
        self.sent.append(data)


def test_sync_replays_the_log_then_the_status(monkeypatch):
    fake = _FakeComm()
    monkeypatch.setattr(comm, "_comm", fake)
    monkeypatch.setattr(comm, "_log", comm.deque([{"type": "verdict", "name": "a"}], maxlen=comm.MAX_LOG))
    comm._on_msg({"content": {"data": {"type": "sync", "version": 1}}})
    assert [m["type"] for m in fake.sent] == ["history", "status"]
    assert fake.sent[0]["verdicts"] == [{"type": "verdict", "name": "a"}]
    comm._on_msg({"content": {"data": {"type": "something-else"}}})  # ignored
    assert len(fake.sent) == 2


@pytest.mark.parametrize("msg", [None, "sync", ["sync"], 3, {"content": None}, {"content": "x"},
                                 {"content": {"data": "sync"}}, {"content": {"data": ["sync"]}},
                                 {"content": {"data": None}}, {"content": {"data": {"type": ["sync"]}}},
                                 {"content": {"data": {"type": {"sync": 1}}}}, {}])
def test_a_malformed_message_is_ignored_without_a_traceback(monkeypatch, msg):
    fake = _FakeComm()
    monkeypatch.setattr(comm, "_comm", fake)
    comm._on_msg(msg)  # raised AttributeError/TypeError (printed as a traceback by the comm) before
    assert fake.sent == []


def test_a_sync_that_cannot_be_answered_raises_nothing(monkeypatch):
    class Broken(_FakeComm):
        def send(self, data):
            raise RuntimeError("the frontend went away")

    monkeypatch.setattr(comm, "_comm", Broken())
    comm._on_msg({"content": {"data": {"type": "sync", "version": 1}}})


def test_close_forgets_only_the_current_comm(monkeypatch):
    old, new = _FakeComm(), _FakeComm()
    monkeypatch.setattr(comm, "_comm", new)
    comm._closed(old)
    assert comm._comm is new
    comm._closed(new)
    assert comm._comm is None


# -- in a real gpuiter kernel, as the JupyterLab extension sees it --------------------------------

def _exchange(client, msg_id: str, timeout: float = 60) -> list[dict]:
    """The iopub messages of one request until the kernel is idle again."""
    return iopub_until_idle(client, msg_id, timeout)


_ours: set[str] = set()  # ids of the jupyter_gpuiter comms seen (widgets open comms of their own)


def _comm_traffic(msgs: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for m in msgs:
        kind, content = m["msg_type"], m["content"]
        if kind == "comm_open" and content["target_name"] == comm.TARGET:
            _ours.add(content["comm_id"])
        if kind.startswith("comm_") and content["comm_id"] in _ours:
            out.append((kind, content))
    return out


def test_kernel_opens_the_comm_and_answers_sync(gpuiter_kernel):
    kc = gpuiter_kernel
    traffic = _comm_traffic(_exchange(kc, kc.execute("%%gpucompile --quiet\ndef f(x):\n    return x + 1\n")))
    kinds = [k for k, _ in traffic]
    assert kinds == ["comm_open", "comm_msg", "comm_msg"], traffic
    opened = traffic[0][1]
    assert opened["target_name"] == comm.TARGET and opened["data"] == {"type": "hello", "version": 1}
    cid = opened["comm_id"]
    verdict, status = traffic[1][1]["data"], traffic[2][1]["data"]
    assert verdict["type"] == "verdict" and verdict["name"] == "f" and verdict["passed"] is True
    assert status["type"] == "status" and status["last"]["name"] == "f"

    # a compile error is a verdict too, on the same comm
    traffic = _comm_traffic(_exchange(kc, kc.execute("%%gpucompile\ndef g(x):\n    return x + y\n")))
    assert [(k, c["comm_id"], c["data"]["type"]) for k, c in traffic] == [("comm_msg", cid, "verdict")]
    assert traffic[0][1]["data"]["error"]["kind"] == "unknown-name" and traffic[0][1]["data"]["name"] == "g"

    # a frontend that attached late asks for the history: it gets both verdicts, then the status
    sync = kc.session.msg("comm_msg", {"comm_id": cid, "data": {"type": "sync", "version": 1}})
    kc.shell_channel.send(sync)
    traffic = _comm_traffic(_exchange(kc, sync["header"]["msg_id"]))
    history, status = (c["data"] for _, c in traffic)
    assert history["type"] == "history" and [v["name"] for v in history["verdicts"]][-2:] == ["f", "g"]
    assert status["type"] == "status"

    # gi.verify typed in a cell reaches the panel like a %%gpucompile cell: its verdict, then the status
    cell = "import jupyter_gpuiter as gi\ngi.verify('def h(x):\\n    return x * 2\\n', 'def r(x):\\n    return x + x\\n', tests=100)"
    traffic = _comm_traffic(_exchange(kc, kc.execute(cell)))
    assert [(k, c["comm_id"], c["data"]["type"]) for k, c in traffic] == [("comm_msg", cid, "verdict"),
                                                                         ("comm_msg", cid, "status")], traffic
    assert traffic[0][1]["data"]["name"] == "h" and traffic[0][1]["data"]["passed"] is True

    for data in (["sync"], "sync", 7, None, {"type": None}):
        bad = kc.session.msg("comm_msg", {"comm_id": cid, "data": data})
        kc.shell_channel.send(bad)
        msgs = _exchange(kc, bad["header"]["msg_id"])
        assert _comm_traffic(msgs) == [], data
        assert not [m for m in msgs if m["msg_type"] in ("stream", "error")], (data, msgs)

    # closed by the frontend: the next message opens a new comm
    close = kc.session.msg("comm_close", {"comm_id": cid, "data": {}})
    kc.shell_channel.send(close)
    _exchange(kc, close["header"]["msg_id"])
    traffic = _comm_traffic(_exchange(kc, kc.execute("%gpuiter status")))
    assert traffic[0][0] == "comm_open" and traffic[0][1]["comm_id"] != cid, traffic


# -- the Session's events become the messages ------------------------------------------------------------------

def test_each_iteration_becomes_its_messages():
    sess = gi.Session("cpu")
    events = []
    sess.subscribe(events.append)
    sess.compile("def ok(x):\n    return x\n")
    with pytest.raises(CompileError):
        sess.compile("def bad(x):\n    return y\n", mode="serial")
    sess.verify("def bad2(x):\n    return y\n", "def f(x):\n    return x\n", tests=100)
    sess.verify("def f(x):\n    return x\n", "def f(x):\n    return x\n", tests=100)
    sess.verify_batch(["def f(x):\n    return x\n"], "def f(x):\n    return x\n", tests=100)
    kinds = [[(m["type"], m.get("name"), (m.get("error") or {}).get("kind")) for m in comm.messages(e)] for e in events]
    assert kinds == [
        [],  # a compile that succeeded
        [("verdict", "bad", "unknown-name")],  # a compile that failed
        [],  # the compile a verify made: its verify reports it
        [("verdict", "bad2", "unknown-name"), ("status", None, None)],
        [],
        [("verdict", "f", None), ("status", None, None)],
        [("status", None, None)],
    ]
    bad = comm.messages(events[1])[0]
    assert set(bad) == VERDICT_FIELDS and bad["mode"] == "serial" and bad["seconds"]["compile"] > 0
    verdict = comm.messages(events[5])[0]
    assert set(verdict) == VERDICT_FIELDS and verdict["passed"] is True and verdict["tests"] == 100
    assert set(verdict["seconds"]) >= {"compile", "execute_and_compare"}


def test_gi_verify_in_a_kernel_sends_one_verdict_and_the_status(monkeypatch):
    fake = _FakeComm()
    monkeypatch.setattr(comm, "_comm", fake)
    monkeypatch.setattr(comm, "_kernel", lambda: True)
    monkeypatch.setattr(comm, "_log", comm.deque(maxlen=comm.MAX_LOG))
    comm.attach()
    comm.attach()  # once only, however often the extension loads
    gi.verify("def twice(x):\n    return x * 2\n", "def f(x):\n    return x + x\n", tests=100)
    assert [m["type"] for m in fake.sent] == ["verdict", "status"]
    assert fake.sent[0]["name"] == "twice" and fake.sent[0]["passed"] is True
    assert fake.sent[1]["last"]["name"] == "twice" and list(comm._log) == [fake.sent[0]]
    comm.detach()
    gi.verify("def twice(x):\n    return x * 2\n", "def f(x):\n    return x + x\n", tests=100)
    assert len(fake.sent) == 2


def test_outside_a_kernel_no_message_is_even_built(monkeypatch):
    def fail(*args):
        raise AssertionError("built a message with no kernel to carry it")

    monkeypatch.setattr(comm, "messages", fail)
    comm.attach()
    try:
        gi.verify("def f(x):\n    return x\n", "def f(x):\n    return x\n", tests=100)
    finally:
        comm.detach()
