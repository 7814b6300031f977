def gelu(x):
    # tanh approximation
    inner = 0.7978845608 * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + tanh(inner))
