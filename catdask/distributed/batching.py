"""Shorter message batching on distributed's streams: a Gram pass is a few tasks and one small
result, latency-bound at small N, and each of its messages waited for distributed's batching
intervals (catdask's clusters and clients use these; :mod:`.cluster`, :mod:`.worker_setup`).
"""

from __future__ import annotations

#: Seconds between batched messages on catdask's client, embedded scheduler and local workers'
#: streams (distributed's defaults: 10 ms, 5 ms, 2 ms). A Gram pass is a few tasks and one
#: small result, latency-bound at small N, so each pass waited for those intervals.
MESSAGE_BATCH_SECONDS = 0.001


def reduce_message_batching(client, scheduler=None, seconds=MESSAGE_BATCH_SECONDS):
    """Shorten distributed's message batching for ``client`` (and ``scheduler``, an in-process
    :class:`distributed.Scheduler`, when given). distributed hard-codes the intervals, so this sets
    its ``BatchedSend`` objects' ``interval`` (nothing on a release without them). Returns how many
    streams were changed; workers that join ``scheduler`` later are shortened by a plugin.
    """
    streams = [getattr(client, "scheduler_comm", None)]
    if scheduler is not None:
        streams += list(getattr(scheduler, "stream_comms", {}).values())
        streams += list(getattr(scheduler, "client_comms", {}).values())
        if hasattr(scheduler, "stream_comms"):
            scheduler.add_plugin(_brief_worker_batching(seconds), idempotent=True)
    return sum(_shorten(stream, seconds) for stream in streams)


def shorten_worker_batching(worker, seconds=MESSAGE_BATCH_SECONDS):
    """Shorten a worker's own stream to the scheduler (its task-finished messages); the
    worker preload of catdask's local clusters calls it (:mod:`.worker_setup`)."""
    return _shorten(getattr(worker, "batched_stream", None), seconds)


def _shorten(stream, seconds):
    if stream is None or not hasattr(stream, "interval"):
        return 0
    stream.interval = min(stream.interval, seconds)
    return 1


def _brief_worker_batching(seconds):
    """Scheduler plugin: a worker that joins later (one its nanny restarted, one added by
    :func:`restore_embedded_workers`) gets the short batching too."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class BriefWorkerBatching(SchedulerPlugin):
        name = "catdask-brief-batching"

        def add_worker(self, scheduler, worker):
            _shorten(scheduler.stream_comms.get(worker), seconds)

    return BriefWorkerBatching()
