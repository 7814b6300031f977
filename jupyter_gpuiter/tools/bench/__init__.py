"""The benchmarks behind `gpuiter bench`.

SUITES measure the system: each prints ratios measured side by side in one run and writes JSON (`gpuiter
bench [SUITE|all]`). TOOLS measure the traditional compiler's parts, for whoever tunes it: each takes its
own options (`gpuiter bench TOOL --help`) and prints its figures. All share common.py's timing helpers.
"""

SUITES = ("compile", "vm", "loop", "verify", "neural", "peers")
#: `gpuiter bench NAME ...`: the measurement tools (chunks.py, chunk_cost.py, host.py, ops.py, compile_profile.py,
#: settings.py, ab.py; each a `main(argv)`)
TOOLS = ("chunks", "chunk-cost", "host", "ops", "profile", "settings", "ab")
