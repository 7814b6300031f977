def bs_call(s, k, t, r, v):
    sqrt_t = sqrt(t)
    d1 = (log(s / k) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1 = 0.5 * (1.0 + erf(d1 / sqrt(2.0)))
    n2 = 0.5 * (1.0 + erf(d2 / sqrt(2.0)))
    return s * n1 - k * exp(-r * t) * n2
