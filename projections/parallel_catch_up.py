"""A rebuild's long part, projected by several processes at once (issue 14).

One process projects at most one core's worth: the rules, token counts and
row encoding all run under its GIL.  Partitions are independent enough to
share out: each batch locks only its partition's tracking row, and an
attach or merge that needs a session of another partition catches that
partition up first under that partition's lock (``projections.processor``).
So helper processes, each with its own store and processor on the same
tables, take a share of the partitions, and nothing else coordinates them:
whoever projects a partition's events, the rows are the same (invariant 10).

PostgreSQL only.  SQLite has one writer, and a batch computes inside its
write transaction, so a second process would only take turns with the first.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from domain.application import CtxStore
from domain.policy import Policy
from domain.tokens import check_tokenizer
from projections.processor import Processor, Stop
from projections.store import ProjectionStore


def shares(partitions: int, processes: int) -> list[list[int]]:
    """Partitions dealt out round-robin: at most one share per process, none empty."""
    dealt = [list(range(first, partitions, processes)) for first in range(processes)]
    return [share for share in dealt if share]


def catch_up_in_parallel(processor: Processor, processes: int, stop: Stop = None) -> int:
    """Catch ``processor`` up, with ``processes - 1`` helpers projecting their shares.

    ``processor`` projects the first share itself, then catches up every
    partition, which finds the helpers' shares done (each of its projectors
    for them starts from their rows, holding no session until one is read).
    """
    store = processor.store
    if processes <= 1 or store.is_sqlite or processor.partitions == 1:
        return processor.catch_up(stop=stop)
    split = shares(processor.partitions, processes)
    context = multiprocessing.get_context("spawn")  # no forked copies of pools or locks
    with ProcessPoolExecutor(len(split) - 1, mp_context=context) as pool:
        helpers = [
            pool.submit(
                project_share, store.url, store.schema, share, processor.partitions, stop
            )  # fmt: skip
            for share in split[1:]
        ]
        done = sum(processor.catch_up(partition=p, stop=stop) for p in split[0])
        done += sum(helper.result() for helper in helpers)
    return done + processor.catch_up(stop=stop)


def project_share(url: str, schema: str | None, share: list[int], partitions: int,
                  stop: Stop) -> int:  # fmt: skip
    """In a helper process: project ``share`` of ``partitions`` into ``schema``'s tables."""
    check_tokenizer()
    app = CtxStore(url=url, env={"CREATE_TABLE": "n"})  # the parent made them
    store = ProjectionStore(url, schema=schema)
    try:
        history = store.policy_history()
        policy = history[-1][1] if history else Policy()
        processor = Processor(app, store, policy, partitions=partitions)
        return sum(processor.catch_up(partition=p, stop=stop) for p in share)
    finally:
        store.close()
        app.close()
