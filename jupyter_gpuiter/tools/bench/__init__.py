"""The benchmark suites behind `gpuiter bench`: each prints ratios measured side by side in one run and
writes JSON."""

SUITES = ("compile", "vm", "loop", "verify", "neural", "peers")
