def logsumexp(x):
    """log(sum(exp(x))) of each row without overflow: one number a row."""
    m = max(x)
    return m + log(sum(exp(x - m)))
