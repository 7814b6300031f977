def softmax(x):
    """Softmax over the row, stable: the max is subtracted before exp."""
    e = exp(x - max(x))
    return e / sum(e)
