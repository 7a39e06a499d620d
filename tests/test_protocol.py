"""The wire format: framing, caps, deadlines and malformed input."""

from __future__ import annotations

import os
import time

import pytest

from grader.confined import protocol


@pytest.fixture
def pipe():
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


@pytest.mark.unit
def test_messages_round_trip(pipe):
    read, write = pipe
    message = {"ok": [1, 2.5, "x", None, True, {"$t": [1, {"$ref": 3}]}]}
    protocol.send(write, message)
    assert protocol.Inbox(read).receive(time.monotonic() + 1) == message


@pytest.mark.unit
def test_messages_that_arrive_together_are_read_one_at_a_time(pipe):
    read, write = pipe
    for n in range(3):
        protocol.send(write, {"n": n})
    inbox = protocol.Inbox(read)
    assert [inbox.receive(time.monotonic() + 1) for _ in range(3)] == [{"n": 0}, {"n": 1}, {"n": 2}]


@pytest.mark.unit
def test_a_silent_peer_misses_the_deadline(pipe):
    read, _ = pipe
    started = time.monotonic()
    with pytest.raises(protocol.Deadline):
        protocol.Inbox(read).receive(time.monotonic() + 0.2)
    assert time.monotonic() - started < 1


@pytest.mark.unit
def test_a_closed_pipe_is_reported(pipe):
    read, write = pipe
    os.close(write)
    with pytest.raises(protocol.PeerClosed):
        protocol.Inbox(read).receive(time.monotonic() + 1)


@pytest.mark.unit
def test_an_oversized_announcement_is_refused_before_reading(pipe):
    read, write = pipe
    os.write(write, protocol.HEADER.pack(protocol.MAX_MESSAGE_BYTES + 1))
    with pytest.raises(protocol.ProtocolError, match="cap"):
        protocol.Inbox(read).receive(time.monotonic() + 1)


@pytest.mark.unit
def test_a_body_that_is_not_json_is_a_protocol_error(pipe):
    read, write = pipe
    os.write(write, protocol.HEADER.pack(4) + b"\xff\xfe{}")
    with pytest.raises(protocol.ProtocolError, match="not valid JSON"):
        protocol.Inbox(read).receive(time.monotonic() + 1)


@pytest.mark.unit
def test_sending_more_than_the_cap_is_refused(pipe):
    _, write = pipe
    with pytest.raises(protocol.ProtocolError):
        protocol.send(write, "x" * (protocol.MAX_MESSAGE_BYTES + 10))


@pytest.mark.unit
def test_a_send_to_a_peer_that_stops_reading_ends_at_its_deadline(pipe):
    _read, write = pipe  # nobody reads: the pipe's buffer fills and a blocking write would wait forever
    with pytest.raises(protocol.Deadline):
        protocol.send(write, {"plan": [[1, 1]] * 200_000}, time.monotonic() + 0.3)


@pytest.mark.unit
def test_a_send_with_a_deadline_delivers_a_message_larger_than_the_pipe(pipe):
    import threading

    read, write = pipe
    message = {"plan": [[n, 1] for n in range(50_000)]}  # several times a pipe's 64 KiB
    received = []
    reader = threading.Thread(target=lambda: received.append(protocol.Inbox(read).receive(time.monotonic() + 10)))
    reader.start()
    protocol.send(write, message, time.monotonic() + 10)
    reader.join()
    assert received == [message]


@pytest.mark.unit
def test_a_message_that_arrived_before_the_deadline_passed_is_still_read(pipe):
    read, write = pipe
    protocol.send(write, {"ready": True})
    assert protocol.Inbox(read).receive(time.monotonic() - 1) == {"ready": True}


@pytest.mark.parametrize("magic_ok", [True, False])
def test_the_worker_zip_carries_bytecode_and_a_foreign_python_compiles_the_source(tmp_path, magic_ok):
    """Each worker module comes with its bytecode, which an interpreter of the same version loads
    without compiling; one whose magic number differs falls back to the source in the same zip."""
    import importlib.util
    import io
    import subprocess
    import sys
    import zipfile

    from grader.harness.contract import worker_zip
    from grader.sandbox.layout import HARNESS_PACKAGE

    archive = zipfile.ZipFile(io.BytesIO(worker_zip(HARNESS_PACKAGE)))
    names = set(archive.namelist())
    modules = ["__init__.py", *(f"confined/{path.name}" for path in (HARNESS_PACKAGE / "confined").glob("*.py"))]
    assert "confined/worker.py" in modules and "confined/zygote.py" in modules
    # The confined package, whole, and nothing of the harness: a worker has no use for it.
    assert {name for name in names if name.endswith(".py")} == {f"grader/{module}" for module in modules}
    for module in modules:
        assert {f"grader/{module}", f"grader/{module}c"} <= names
        assert archive.read(f"grader/{module}c")[:4] == importlib.util.MAGIC_NUMBER
    # Bytecode is what is loaded: with every source replaced by a syntax error, the import still works
    # when the magic number is this interpreter's, and fails on the source when it is not.
    rebuilt = tmp_path / "worker.zip"
    with zipfile.ZipFile(rebuilt, "w") as out:
        for name in archive.namelist():
            data = archive.read(name)
            if name.endswith(".py"):
                data = b"this is not python(\n"
            elif not magic_ok:
                data = b"\x00\x00\r\n" + data[4:]
            out.writestr(name, data)
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(rebuilt)!r}); "
                           "import grader.confined.worker"], capture_output=True, text=True)
    assert (done.returncode == 0) == magic_ok, done.stderr[-500:]
    if not magic_ok:
        assert "SyntaxError" in done.stderr


@pytest.mark.unit
def test_the_worker_zip_is_kept_on_disk_and_a_kept_one_that_does_not_hold_the_sources_is_made_again(
        tmp_path, monkeypatch):
    """A later run reads the zip the first one kept instead of compiling the worker again; a kept file
    that is not the zip of these very sources (another version's, cut short, or with bytecode that is
    not its source's) is never handed to a worker: the zip is made again and kept in its place."""
    import io
    import zipfile

    from grader.harness.contract import worker_files, worker_zip, zip_holds
    from grader.sandbox import layout

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh = worker_zip(layout.HARNESS_PACKAGE)
    files = worker_files(layout.HARNESS_PACKAGE)
    assert zip_holds(fresh, files)
    layout._worker_zip.cache_clear()
    try:
        assert layout._worker_zip() == fresh
        (kept,) = (tmp_path / "grader").glob("worker-*.zip")
        assert kept.read_bytes() == fresh

        # Read from the disk: what the file holds is what the next run gets, once it is checked.
        compiled: list[str] = []
        monkeypatch.setattr(layout, "worker_zip", lambda package: compiled.append("made") or fresh)
        layout._worker_zip.cache_clear()
        assert layout._worker_zip() == fresh and compiled == []

        # Bytecode that is not its source's: refused, made again, and the kept file replaced.
        rebuilt = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(fresh)) as archive, zipfile.ZipFile(rebuilt, "w") as out:
            for name in archive.namelist():
                data = archive.read(name)
                if name == "grader/confined/worker.pyc":
                    data = archive.read("grader/confined/zygote.pyc")
                out.writestr(name, data)
        for tampered in (rebuilt.getvalue(), fresh[: len(fresh) // 2], b""):
            kept.write_bytes(tampered)
            assert not zip_holds(tampered, files)
            layout._worker_zip.cache_clear()
            assert layout._worker_zip() == fresh
            assert kept.read_bytes() == fresh
        assert compiled == ["made"] * 3
    finally:
        layout._worker_zip.cache_clear()
