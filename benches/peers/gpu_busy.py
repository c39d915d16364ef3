"""~1 ms of GPU work queued before every timed torch call, as the Rust bench does with its busy
kernel (src/timing.rs): a GPU that idles while the CPU waits between single calls drops its
clocks (measured on the H200: 345-1080 MHz spells instead of 1980), which made torch's single-call
times move by ~50% between days. The timed call's start event is recorded after the busy work, so
the busy time is never counted.

WGK_TORCH_BUSY selects the work (measured side by side on the H200, see BENCHMARKS.md):
  sleep  (default) one `torch.cuda._sleep` spin kernel: a single launch, no memory traffic, like
         our arithmetic-only busy kernel
  matmul a chain of 512x512 fp32 matmuls (many small launches)
  none   nothing (the first 2026-11-21/22 measurements)
"""
import os

import torch


class Busy:
    def __init__(self, target_us=1000.0, dev="cuda"):
        self.mode = os.environ.get("WGK_TORCH_BUSY", "sleep")
        if self.mode == "sleep" and not hasattr(torch.cuda, "_sleep"):
            self.mode = "matmul"
        self.a = torch.randn(512, 512, device=dev) if self.mode == "matmul" else None
        self.n = 1 if self.mode == "matmul" else 100_000
        if self.mode != "none":
            self.calibrate(target_us)
        print(f"busy work before each timed call: {self.mode} (n = {self.n})", flush=True)

    def calibrate(self, target_us):
        for _ in range(24):  # double the work until one call takes target_us
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.run()
            s.record()
            self.run()
            e.record()
            torch.cuda.synchronize()
            if s.elapsed_time(e) * 1e3 >= target_us:
                break
            self.n *= 2

    def run(self):
        """Queue the busy work (does not wait)."""
        if self.mode == "sleep":
            torch.cuda._sleep(self.n)
        elif self.mode == "matmul":
            x = self.a
            for _ in range(self.n):
                x = torch.mm(x, self.a).mul_(1e-3)


_SHARED = None


def shared():
    """The process's Busy (calibrated on first use), shared by every timing helper."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Busy()
    return _SHARED
