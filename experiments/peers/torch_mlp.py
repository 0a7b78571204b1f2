#!/usr/bin/env python3
"""torch_mlp.py: PyTorch's eager CPU GeGLU MLP forward on the shapes mlp_sweep.lua uses, so the
comparison can be reproduced: the peer runs on the same machine, between rounds of ours. Prints JSON: {"torch": version, "blas": ...,
"blas_library": the BLAS it loaded (OpenBLAS's version and kernels),
"threads": n, "results": [{"tokens": t, "median_ms": ..., "samples_ms": [...]}, ...]}.
mlp_sweep.lua runs it once per round, between rounds of its own modes, with the rule its own modes
are timed by: at least --rounds forwards (its --iters) and --min-time-ms of them (50) per token
count, after warm-up forwards; and with OMP_WAIT_POLICY=passive, so that torch's OpenMP threads
sleep at once when idle instead of spinning against the workbench's next round.

    python3 experiments/peers/torch_mlp.py --tokens 1,16,128,512 --threads 1

Debian's python3-torch uses OpenBLAS; set OPENBLAS_CORETYPE (SKYLAKEX on AVX-512 CPUs, HASWELL
on AVX2) or OpenBLAS may fall back to SSE kernels on CPUs it does not recognise."""
import argparse
import json
import math
import os
import statistics
import time


def blas_in_use():
    """The BLAS library this process has loaded, as "OpenBLAS 0.3.21 (Cooperlake kernels) through
    libblas.so.3": torch's BLAS_INFO=generic only says it calls whatever libblas.so.3 resolves to.
    "" when no shared BLAS is loaded (a BLAS linked into torch itself, such as MKL)."""
    import ctypes
    seen = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if path not in seen and (name.startswith("libblas.so") or name.startswith("libopenblas")):
                    seen.append(path)
    except OSError:
        return ""
    if not seen:
        return ""
    # what torch calls: libblas.so.3 when it is loaded (Debian's alternative behind it is OpenBLAS's)
    seen.sort(key=lambda p: not os.path.basename(p).startswith("libblas.so"))
    for path in seen:
        try:
            lib = ctypes.CDLL(path)
            config, core = lib.openblas_get_config, lib.openblas_get_corename
        except (OSError, AttributeError):
            continue
        config.restype = core.restype = ctypes.c_char_p
        words = (config() or b"").decode(errors="replace").split()
        version = words[1] if len(words) > 1 and words[0] == "OpenBLAS" else "?"
        kernels = (core() or b"").decode(errors="replace").capitalize() or "unknown"
        return "OpenBLAS %s (%s kernels) through %s" % (version, kernels, os.path.basename(seen[0]))
    return "%s (not OpenBLAS)" % os.path.basename(seen[0])  # another BLAS (reference, BLIS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1,16,128,512")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--hidden", type=int, default=3072)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20, help="forwards timed per token count (at least)")
    ap.add_argument("--min-time-ms", type=float, default=0.0,
                    help="and at least this much time of timed forwards per token count")
    ap.add_argument("--min-sample-us", type=float, default=0.0,
                    help="a sample is the mean of a batch of forwards lasting at least this long (0: one forward)")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args()
    # OpenBLAS's own pool would otherwise use every core on top of torch's threads
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    if "OPENBLAS_CORETYPE" not in os.environ:
        flags = open("/proc/cpuinfo").read()
        os.environ["OPENBLAS_CORETYPE"] = "SKYLAKEX" if "avx512f" in flags else "HASWELL" if "avx2" in flags else ""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    class SimpleGeGLUMLP(torch.nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.gate_proj = torch.nn.Linear(dim, hidden, bias=False)
            self.up_proj = torch.nn.Linear(dim, hidden, bias=False)
            self.down_proj = torch.nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))

    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    mlp = SimpleGeGLUMLP(a.dim, a.hidden).eval().to(dtype)
    out = []
    with torch.no_grad():
        for t in [int(v) for v in a.tokens.split(",")]:
            x = torch.randn(t, a.dim).to(dtype)
            fastest = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                mlp(x)
                fastest = min(fastest, time.perf_counter() - t0)
            batch = max(1, math.ceil(a.min_sample_us * 1e-6 / max(fastest, 1e-9))) if a.min_sample_us > 0 else 1
            samples, spent_ms = [], 0.0
            while len(samples) < a.rounds or spent_ms < a.min_time_ms:
                t0 = time.perf_counter()
                for _ in range(batch):
                    mlp(x)
                took = (time.perf_counter() - t0) * 1e3
                samples.append(took / batch)
                spent_ms += took
            out.append({"tokens": t, "median_ms": statistics.median(samples), "samples_ms": samples, "batch": batch})
    blas = [line.strip() for line in torch.__config__.show().splitlines() if "BLAS" in line]
    print(json.dumps({"torch": torch.__version__, "dtype": a.dtype, "blas": "; ".join(b[:120] for b in blas),
                      "blas_library": blas_in_use(), "threads": a.threads,
                      "coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""), "results": out}))


if __name__ == "__main__":
    main()
