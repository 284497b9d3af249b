"""A pull stream tells every sender whether its frame was written: the base of "was the task sent".

The dispatcher fails an attempt as lost only when the task frame reached the Worker's stream, so a
frame that never left the engine must always learn ``False``, never hang.
"""

from __future__ import annotations

import asyncio

from dex.dexpb import dex_pb2 as pb
from dex_local_engine.pull_worker_registry import WorkerStream


def _stream() -> WorkerStream:
    registration = pb.PollWorkerTaskRegister(
        queue="Flow", app_worker_id="worker-1", flow_types=["Flow"]
    )
    return WorkerStream(stream_id=1, registration=registration)


def _ping() -> pb.PollWorkerTaskResponse:
    return pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing())


async def test_a_frame_sent_to_a_closed_stream_is_not_written() -> None:
    stream = _stream()
    stream.is_closed = True
    written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    stream.send(_ping(), written)

    assert written.done() and written.result() is False
    assert stream.outbox.empty()


async def test_frames_left_in_the_outbox_learn_they_were_not_written() -> None:
    stream = _stream()
    loop = asyncio.get_running_loop()
    first: asyncio.Future[bool] = loop.create_future()
    second: asyncio.Future[bool] = loop.create_future()
    stream.send(_ping(), first)
    stream.send(_ping())  # a frame nobody waits for
    stream.send(_ping(), second)
    assert not first.done()

    stream.fail_unwritten()

    assert (first.result(), second.result()) == (False, False)
    assert stream.outbox.empty()
