# Measures one pass (rules) eager vs torch.compile(dynamic=True) on 2,000 generated programs (docs/performance.md).
import importlib
import time

import torch

from jupyter_gpuiter.compilers.traditional.lex import lex
from jupyter_gpuiter.compilers.traditional.pack import pack
from jupyter_gpuiter.lang import generate

R = importlib.import_module("jupyter_gpuiter.compilers.traditional.rules")
srcs = sorted(generate.generate_batch(2000, 5), key=len)
d, l = pack(srcs, 'cpu')
tk = lex(d, l, 4096)
ok = (tk.lex_error == 0) & ~tk.truncated
t0 = time.perf_counter(); st = R.check(tk, ok); print("eager", time.perf_counter() - t0)
t0 = time.perf_counter(); st = R.check(tk, ok); print("eager", time.perf_counter() - t0)
cc = torch.compile(R.check, dynamic=True)
t0 = time.perf_counter(); st2 = cc(tk, ok); print("compile+run", time.perf_counter() - t0)
t0 = time.perf_counter(); st2 = cc(tk, ok); print("compiled", time.perf_counter() - t0)
print(torch.equal(st.error, st2.error))
