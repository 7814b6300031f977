"""Each token pass (rules, parse, semantic, codegen) eager vs torch.compile(dynamic=True) on 4,096
generated programs in chunks of 512: per-pass times, the compilation time, and a check that the results
are the same (docs/performance.md). Takes about 10 minutes on the 2-core CPU, nearly all compiling."""

import importlib
import sys
import time

import torch

from jupyter_gpuiter.compilers.traditional import NO_ERROR
from jupyter_gpuiter.compilers.traditional.pack import pack
from jupyter_gpuiter import generate

lex, rules, parse, semantic, codegen = (importlib.import_module(f"jupyter_gpuiter.compilers.traditional.{m}")
                                        for m in ("lex", "rules", "parse", "semantic", "codegen"))
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
sources = sorted(generate.generate_batch(4096, 0), key=len)
chunks = [pack(sources[i:i + 512], "cpu") for i in range(0, len(sources), 512)]
tokens = [lex.lex(data, lengths, 4096) for data, lengths in chunks]


def run(passes, label):
    times, outputs = dict.fromkeys(("rules", "parse", "semantic", "codegen"), 0.0), []
    for tk in tokens:
        t0 = time.perf_counter()
        st = passes[0](tk, (tk.lex_error == 0) & ~tk.truncated)
        t1 = time.perf_counter()
        tr = passes[1](tk, st, st.error == NO_ERROR)
        t2 = time.perf_counter()
        sm = passes[2](tk, st, tr)
        t3 = time.perf_counter()
        outputs.append(passes[3](tk, tr, sm))
        t4 = time.perf_counter()
        for name, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[name] += dt
    print(f"{label:12s}", {k: round(v * 1000) for k, v in times.items()}, f"total {sum(times.values()) * 1000:.0f} ms",
          flush=True)
    return outputs


eager = [rules.check, parse.parse, semantic.analyse, codegen.codegen]
run(eager, "eager")
reference = run(eager, "eager")
fused = [torch.compile(f, dynamic=True) for f in eager]
t0 = time.perf_counter()
run(fused, "first call")
print(f"compilation and first run: {time.perf_counter() - t0:.0f} s")
run(fused, "compiled")
for a, b in zip(reference, run(fused, "compiled")):
    for x, y in zip(a, b):
        assert torch.equal(x, y) or (x.is_floating_point() and torch.allclose(x, y, 0, 0, equal_nan=True))
print("same results")
