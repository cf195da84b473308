"""The adb flow against a STAND-IN adb (tests/farm/fake_adb.py): no phone exists on this machine. The stand-in
replays canned outputs of `adb devices -l`, `getprop` and `dumpsys SurfaceFlinger` (written to look like a
Snapdragon 8 Gen 2 phone, not captured from one), logs every command it receives, and plays a `tvm_rpc server`
that dies after FAKE_ADB_LIFETIMES seconds."""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

from adreno.farm.android import Adb, AdbError, discover, gpu_key, parse_getprop, serve_phones

STAND_IN = os.path.join(os.path.dirname(__file__), "fake_adb.py")


@pytest.fixture
def stand_in_adb(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_ADB_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_ADB_LIFETIMES", "0.3")  # the first server start dies after 0.3 s
    return Adb([sys.executable, STAND_IN], timeout=20), tmp_path


def logged(folder):
    with open(folder / "commands.jsonl") as handle:
        return [json.loads(line) for line in handle]


def test_stand_in_discovery_reads_soc_gpu_and_build(stand_in_adb, capsys):
    adb, folder = stand_in_adb
    phones = discover(adb)
    assert [p.serial for p in phones] == ["R5CW12345AB"]  # the unauthorized one is skipped, and said so
    assert "unauthorized" in capsys.readouterr().out
    phone = phones[0]
    assert (phone.key, phone.soc, phone.android, phone.model) == ("adreno-740", "SM8550", "14", "SM-S911B")
    assert "Adreno (TM) 740" in phone.gpu
    assert logged(folder)[:3] == [["devices", "-l"], ["-s", "R5CW12345AB", "shell", "getprop"],
                                  ["-s", "R5CW12345AB", "shell", "dumpsys", "SurfaceFlinger"]]


def test_gpu_keys():
    assert gpu_key("Qualcomm, Adreno (TM) 830, OpenGL ES 3.2") == "adreno-830"
    assert gpu_key("ARM, Mali-G715, OpenGL ES 3.2") == "mali-g715"
    assert parse_getprop("[a.b]: [x y]\n[c]: []\n") == {"a.b": "x y", "c": ""}


def test_stand_in_flow_pushes_forwards_restarts_and_cleans_up(stand_in_adb, tmp_path):
    adb, folder = stand_in_adb
    runtime = {}
    for name in ("tvm_rpc", "libtvm_runtime.so"):
        (tmp_path / name).write_bytes(b"stand-in binary")
        runtime[name] = str(tmp_path / name)
    stop = threading.Event()
    messages = []

    def log(text):
        messages.append(text)
        if "start 2" in text:  # the restarted server is up: end the session after one more poll
            threading.Timer(0.5, stop.set).start()

    timer = threading.Timer(20, stop.set)  # bound the test even if no restart comes
    timer.start()
    try:
        servers = serve_phones(adb, tracker_port=9190, runtime=runtime, base_port=9300, stop=stop, poll=0.1, log=log,
                               token="t0ken")
    finally:
        timer.cancel()
    assert servers[0].starts == 2, messages
    commands = [c[2:] for c in logged(folder) if c[:2] == ["-s", "R5CW12345AB"]]
    start = commands.index(["shell", "mkdir", "-p", "/data/local/tmp/adreno-farm"])
    server_cmd = [c for c in commands if c[0] == "shell" and "tvm_rpc server" in c[1]]
    assert commands[start:start + 6] == [
        ["shell", "mkdir", "-p", "/data/local/tmp/adreno-farm"],
        ["push", runtime["tvm_rpc"], "/data/local/tmp/adreno-farm/tvm_rpc"],
        ["push", runtime["libtvm_runtime.so"], "/data/local/tmp/adreno-farm/libtvm_runtime.so"],
        ["shell", "chmod", "755", "/data/local/tmp/adreno-farm/tvm_rpc"],
        ["reverse", "tcp:9190", f"tcp:{servers[0].relay_port}"],  # through the relay that adds the farm's token
        ["forward", "tcp:9300", "tcp:9300"],
    ]
    assert len(server_cmd) == 2  # started, died, restarted
    assert "--tracker=127.0.0.1:9190" in server_cmd[0][1] and "--key=adreno-740" in server_cmd[0][1]
    assert "--port=9300" in server_cmd[0][1] and "--custom-addr=127.0.0.1" in server_cmd[0][1]
    assert any("exited" in m and "restarting" in m for m in messages)
    assert commands[-3:] == [["shell", "pkill -x tvm_rpc || true"], ["forward", "--remove", "tcp:9300"],
                             ["reverse", "--remove", "tcp:9190"]]


def test_stand_in_phone_that_keeps_dying_is_dropped(stand_in_adb, monkeypatch):
    adb, folder = stand_in_adb
    monkeypatch.setenv("FAKE_ADB_LIFETIMES", "0.05,0.05,0.05,0.05")
    messages = []
    servers = serve_phones(adb, tracker_port=9190, base_port=9300, poll=0.05, max_restarts_per_minute=3,
                           log=messages.append, stop=threading.Event(), token="t0ken")
    assert servers[0].starts == 4 and any("dropping this phone" in m for m in messages)
    assert ["-s", "R5CW12345AB", "reverse", "--remove", "tcp:9190"] in logged(folder)


def test_missing_adb_is_a_clear_error():
    with pytest.raises(AdbError, match="adb not found"):
        discover(Adb("/nonexistent/adb"))
