"""A ~1 ms arithmetic-heavy CUDA workload queued before every timed torch call, as the Rust bench
does with its busy kernel (src/timing.rs): a GPU that idles while the CPU waits between single
calls drops its clocks (measured on the H200: 1020-1080 MHz spells instead of 1980), which made
torch's single-call times move by ~50% between days. The work is a small fp32 matmul chain on
a 2 MB operand, so it touches L2 only lightly, and the timed call's events are recorded after it.
"""
import torch


class Busy:
    def __init__(self, target_us=1000.0, dev="cuda"):
        self.a = torch.randn(512, 512, device=dev)
        self.n = 1
        for _ in range(20):  # double the chain until one call takes target_us
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
        x = self.a
        for _ in range(self.n):
            x = torch.mm(x, self.a).mul_(1e-3)
        return x
