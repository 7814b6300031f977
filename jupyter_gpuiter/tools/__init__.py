"""Tools on top of the package: the `gpuiter` command (cli.py) and the benchmark suites behind
`gpuiter bench` (bench/)."""
