"""The embedded broker writes each message aside and renames it into place: a worker listing the
folder never sees a message before it is whole (kombu's own writer let a worker read an empty
file, and the JSONDecodeError stopped the whole worker)."""

import os

from kombu import Connection

from webapp import filesystem_broker


def _connection(folder):
    return Connection("filesystem://", transport="webapp.filesystem_broker:Transport", transport_options={
        "data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False,
        "control_folder": str(folder / "control")})


def test_a_message_is_whole_before_a_consumer_can_list_it(tmp_path, monkeypatch):
    seen_before_rename = []
    real_replace = os.replace

    def replace(source, target):
        # What a consumer listing the folder now would take: nothing, the message is still aside.
        seen_before_rename.append(sorted(name for name in os.listdir(tmp_path) if name.endswith(".cpu.msg")))
        assert os.path.getsize(source) > 0
        real_replace(source, target)

    monkeypatch.setattr(filesystem_broker.os, "replace", replace)
    with _connection(tmp_path) as connection:
        queue = connection.SimpleQueue("cpu")
        queue.put({"task": "run", "n": 1})
        assert seen_before_rename == [[]]
        assert [name for name in os.listdir(tmp_path) if name.endswith(filesystem_broker.TEMPORARY_SUFFIX)] == []
        message = queue.get(timeout=2)
        assert message.payload == {"task": "run", "n": 1}
        message.ack()
        queue.close()


def test_a_message_being_written_is_not_taken_by_a_consumer(tmp_path):
    # (A queue name of its own: kombu keeps a queue's exchange per process, across connections.)
    (tmp_path / f"1_x.gpu.msg{filesystem_broker.TEMPORARY_SUFFIX}").write_bytes(b"")  # aside, half-written
    with _connection(tmp_path) as connection:
        queue = connection.SimpleQueue("gpu")
        queue.put("whole")
        assert queue.get(timeout=2).payload == "whole"
        assert queue.qsize() == 0
        queue.close()
