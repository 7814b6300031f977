def layernorm(x, gamma, beta):
    """Layer normalisation of each row (population variance, epsilon 1e-5), then scale and shift."""
    mu = mean(x)
    var = mean((x - mu) ** 2)
    return (x - mu) / sqrt(var + 1e-5) * gamma + beta
