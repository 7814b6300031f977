"""Profile the traditional compiler by op on 2,000 generated programs (docs/performance.md)."""

from torch.profiler import ProfilerActivity, profile

from jupyter_gpuiter.compilers.traditional import compile_to_batches
from jupyter_gpuiter.lang import generate

srcs = generate.generate_batch(2000, 5)
compile_to_batches(srcs[:64])
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    compile_to_batches(srcs)
print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=22))
