"""sync_stall's advice: what to change at each kind of sync site, in the report's words (the analysis picks the
text by the site's op, its call and its copy: analyses/sync_stall.py)."""
from __future__ import annotations

import re

from ..trace.facts import DDP_FORWARD
from ..trace.model import FREE_CALL
from ..trace.pycalls import callers


SYNC_FIXES = {
    "aten::item": "keep the value on the GPU (accumulate losses/metrics as tensors and call .item() once "
                  "per N steps or at the end); avoid `if tensor:` / float(tensor) on the hot path",
    "aten::_local_scalar_dense": "keep the value on the GPU; call .item()/.tolist() off the hot path",
    "aten::nonzero": "replace data-dependent shapes with fixed-size ops: torch.where(mask, x, 0), "
                     "multiply by a float mask, or pass `ignore_index` to the loss",
    "aten::index": "boolean-mask indexing x[mask] syncs to size its output: when the selected values feed a "
                   "loss, keep the full tensors and pass ignore_index (labels set to -100 where masked) or use "
                   "reduction='none' times a float mask; elsewhere torch.where(mask, x, 0)",
    "aten::masked_select": "masked_select has a data-dependent size: use torch.where or a float mask",
    "aten::unique": "torch.unique syncs for its output size: precompute, use a fixed-size bincount, or "
                    "move it off the hot path",
    "aten::to": "a device-to-host .to('cpu')/.cpu()/.numpy() blocks: compute what you need from it on "
                "the GPU (argmax, top-k, accuracy, sums) and copy only that small result, or copy into "
                "pinned memory with non_blocking=True and read it a step later",
    "aten::copy_": "a device-to-host copy blocks: compute what you need from it on the GPU (argmax, "
                   "top-k, accuracy) and copy only the small result, or use pinned memory + "
                   "non_blocking=True and an event",
    "aten::repeat_interleave": "repeat_interleave without output_size syncs: pass output_size=",
    "aten::is_nonzero": "`if tensor:` syncs: keep the condition on the GPU (torch.where) or check rarely; a check "
                        "that raises can assert on the GPU: torch._assert_async(cond), no sync (or `assert` compiled)",
}
SYNC_FIXES["aten::_unique2"] = SYNC_FIXES["aten::unique"]
# Blocking calls made outside any op (the site is the runtime call itself).
SYNC_CALL = re.compile(r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize")
CALL_FIXES = (
    (SYNC_CALL,
     "an explicit synchronize (torch.cuda.synchronize(), stream or event .synchronize()) waits for all queued "
     "GPU work: drop it from the loop, or keep one only where you time or read a result"),
    (re.compile(FREE_CALL),
     "the caching allocator handed memory back to the driver, which synchronizes the device: no "
     "torch.cuda.empty_cache() in the loop; near the memory limit, less fragmentation "
     "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) or a smaller peak"),
)


def site_fix(op: str) -> str | None:
    """The advice for a sync site: by its op, or by the runtime call where it is one."""
    return SYNC_FIXES.get(op) or next((f for pattern, f in CALL_FIXES if pattern.match(op)), None)


# A read of a result that is already small (a few values: a token per sequence, a metric) has nothing left to
# shrink: what it waits for is the GPU work before it. The fix is to read less often (the review of the
# thirtieth set: "copy only the small result" was advised for a 128-byte .tolist() of argmax tokens a token).
SMALL_COPY_BYTES = 4096
SMALL_COPY_FIX = ("the copy is already small ({b} bytes a call): keep the values on the GPU (write them into a "
                  "preallocated tensor, or accumulate) and read them once every N steps or at the end")


def small_read(site: dict) -> bool:
    """A copy op (whose own advice is to copy less) that already copies a few values to the host."""
    return (site["op"] in ("aten::to", "aten::copy_") and site.get("copy_direction") == "to the host"
            and site.get("copy_bytes_per_call") is not None and site["copy_bytes_per_call"] <= SMALL_COPY_BYTES)


# A copy from pageable host memory to the GPU is synchronous: the CPU waits for the DMA itself.
TO_DEVICE_FIX = ("a copy from pageable host memory to the GPU blocks the CPU until it is done: pin the source "
                 "(DataLoader(pin_memory=True), tensor.pin_memory()) and copy with non_blocking=True, or keep "
                 "the tensor on the GPU if it is copied every step")


# DistributedDataParallel times its forward, backward and communication with CUDA events and reads them, a
# synchronize and then cudaEventElapsedTime, in its first 10 iterations and once every 100 after (its runtime
# statistics, c10d's Logger). HTA's DDP trace, steps 4-6: eight such syncs a step, advised to be dropped from the loop.
DDP_TIMING_FIX = ("DistributedDataParallel's own timing, not the program's: it times forward, backward and "
                  "communication with CUDA events and reads them (a synchronize, then cudaEventElapsedTime) in its "
                  "first 10 iterations and then once every 100 (its runtime statistics), so later steps do not have "
                  "it. Profile after iteration 10 (schedule(wait=10, ...)) to see the steady step")


# A synchronize at a step's edge, called from a function or file of a harness that profiles or benchmarks the step
# (run_torch_profiler(), torch.utils.benchmark's Timer): the measurement's, which the program run for real
# does not make (a review of TraceLens's small-BERT trace: "drop it from the loop" advised for the harness's own
# synchronize in moca/library/profiling/profile.py).
# Not a timer's: a training loop that synchronizes to time each step pays for it (holdout22_sync_step_timer measured
# it), so only a profiling or benchmark harness's frame counts.
HARNESS_FRAME = re.compile(r" in \w*(?:profil|bench)\w*\(\)|def at \S*(?:profil|bench)", re.IGNORECASE)
HARNESS_TIMING_FIX = ("the measurement's own, not the program's: an explicit synchronize at the step's edge, called "
                      "from the harness that times or profiles the step; it waits only for work the step queued, "
                      "which a timed step must finish anyway, and a run without the harness does not make it. Leave "
                      "it; it is not a cost of the program")


def harness_timing(site: dict) -> bool:
    """A sync site (sync_stall's evidence) that is a timing or profiling harness's synchronize at a step's edge."""
    return bool(SYNC_CALL.match(str(site.get("call", "")))) and bool(site.get("at_step_edge")) and bool(
        HARNESS_FRAME.search(str(site.get("source") or "")))


def ddp_timing(cpu, row: int) -> bool:
    """A synchronize call made inside DistributedDataParallel's forward (its runtime statistics)."""
    names = cpu["name"].to_numpy()
    return bool(SYNC_CALL.match(str(names[row]))) and any(
        names[q] == DDP_FORWARD for q in callers(row, cpu["parent"].to_numpy(), cpu["kind"].to_numpy(),
                                                 cpu["ts"].to_numpy(), cpu["end"].to_numpy()))
