def softplus(x):
    return log1p(exp(-abs(x))) + max(x, 0.0)
