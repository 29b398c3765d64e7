"""Batches made on a Python thread of the training process (the forty-ninth set's before), or in DataLoader worker
processes (its after): the same ``make(i)`` either way, so the two variants load the same data."""

import queue
import threading

import torch


class Producer:
    """A background thread that runs ``make(i)`` for i = 0, 1, ... and hands the batches over through a bounded queue,
    as hand-written prefetchers do (the thread shares the interpreter, and its GIL, with the training loop)."""

    def __init__(self, make, depth=2):
        self.q = queue.Queue(depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(make,), daemon=True, name="batch-producer")
        self.thread.start()

    def _run(self, make):
        i = 0
        while not self.stop.is_set():
            item = make(i)
            i += 1
            while not self.stop.is_set():
                try:
                    self.q.put(item, timeout=0.1)
                    break
                except queue.Full:
                    pass

    def get(self):
        return self.q.get()

    def close(self):
        self.stop.set()
        while True:                  # (a producer blocked on a full queue sees the stop within 0.1 s)
            try:
                self.q.get_nowait()
            except queue.Empty:
                break
        self.thread.join(timeout=10)


class Batches(torch.utils.data.IterableDataset):
    """``make(i)`` as a DataLoader's dataset (batch_size=None): worker k of n makes batches k, k + n, ..."""

    def __init__(self, make):
        self.make = make

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        i, n = (info.id, info.num_workers) if info is not None else (0, 1)
        while True:
            yield self.make(i)
            i += n


def source(variant, make, cuda, workers):
    """(next batch, close): the thread for "before" (pinning on the thread, as the DataLoader's pin_memory thread
    would), DataLoader(num_workers=workers, pin_memory) worker processes otherwise (they must not touch CUDA)."""
    if variant == "before":
        prod = Producer((lambda i: tuple(t.pin_memory() for t in make(i))) if cuda else make)
        return prod.get, prod.close
    kw = dict(num_workers=workers, persistent_workers=True, prefetch_factor=2) if workers else {}
    st = {"it": iter(torch.utils.data.DataLoader(Batches(make), batch_size=None, pin_memory=cuda, **kw))}
    return (lambda: next(st["it"])), st.clear
