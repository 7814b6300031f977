"""Kernels the benchmarks share."""

# a 30-node kernel: Abramowitz & Stegun 7.1.26, erf to 1.5e-7
NODES30 = """def erf_as(x):
    t = 1.0 / (1.0 + 0.3275911 * abs(x))
    p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return copysign(1.0 - p * exp(-x * x), x)
"""
NODES30_REF = """def erf_ref(x):
    return erf(x)
"""
