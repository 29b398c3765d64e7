"""Build small Kineto traces by hand, so a test knows the exact answer."""
from __future__ import annotations

import gzip
import json
from pathlib import Path


class Trace:
    def __init__(self, gpu_name: str = "NVIDIA H100 80GB HBM3", cc: tuple[int, int] = (9, 0)):
        self.events: list[dict] = []
        self.corr = 1000
        self.ext = 1
        self.devices = [{"id": 0, "name": gpu_name, "computeMajor": cc[0], "computeMinor": cc[1],
                         "totalGlobalMem": 80 * 2**30, "numSms": 132}]

    def op(self, name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args) -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
                            "args": {"External id": self.ext, **args}})
        return self.ext

    def step(self, n: int, ts: float, dur: float, tid: int = 1) -> None:
        self.op(f"ProfilerStep#{n}", ts, dur, tid=tid, cat="user_annotation")

    def runtime(self, name: str, ts: float, dur: float, tid: int = 1) -> int:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts,
                            "dur": dur, "args": {"correlation": self.corr}})
        return self.corr

    def gpu(self, name: str, ts: float, dur: float, corr: int | None, cat: str = "kernel", stream: int = 7,
            **args) -> None:
        a = {"device": 0, "stream": stream, **args}
        if corr is not None:
            a["correlation"] = corr
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": a})

    def launch(self, kernel: str, ts: float, kernel_ts: float, kernel_dur: float, tid: int = 1,
               call_dur: float = 5.0, call: str = "cudaLaunchKernel") -> None:
        c = self.runtime(call, ts, call_dur, tid=tid)
        self.gpu(kernel, kernel_ts, kernel_dur, c)

    def doc(self) -> dict:
        return {"schemaVersion": 1, "deviceProperties": self.devices, "traceEvents": self.events}

    def write(self, path: Path, gz: bool = False) -> Path:
        data = json.dumps(self.doc()).encode()
        if gz:
            path.write_bytes(gzip.compress(data))
        else:
            path.write_bytes(data)
        return path
