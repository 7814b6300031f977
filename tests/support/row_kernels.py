"""Real row kernels (docs/language.md, "Row kernels") with their NumPy float64 definitions, and subtly
wrong versions of some of them: shared by the language, runtime, verification and end-to-end tests.

Each entry: name -> (source, numpy function of [rows, n] float64 arrays, domains). The domains keep
inputs where the kernel is meant to be used (probability rows for the losses).
"""

import numpy as np

PROB = {"p": "0.01:1", "q": "0.01:1"}


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _logsumexp(x):
    m = x.max(-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]


def _layernorm(x, gamma, beta):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta


REAL = {
    "softmax": ("def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n", _softmax, None),
    "log_softmax": ("def log_softmax(x):\n    z = x - max(x)\n    return z - log(sum(exp(z)))\n",
                    lambda x: x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(
                        -1, keepdims=True)), None),
    "layernorm": (("def layernorm(x, gamma, beta):\n    mu = mean(x)\n    var = mean((x - mu) ** 2)\n"
                  "    return (x - mu) / sqrt(var + 1e-5) * gamma + beta\n"), _layernorm, None),
    "rmsnorm": ("def rmsnorm(x, g):\n    return x / sqrt(mean(x * x) + 1e-6) * g\n",
                lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g, None),
    "logsumexp": ("def logsumexp(x):\n    m = max(x)\n    return m + log(sum(exp(x - m)))\n", _logsumexp, None),
    "cross_entropy": ("def cross_entropy(p, q):\n    return -sum(p * log(q))\n",
                      lambda p, q: -(p * np.log(q)).sum(-1), PROB),
    "cosine_similarity": (("def cosine_similarity(x, y):\n"
                          "    return sum(x * y) / max(sqrt(sum(x * x)) * sqrt(sum(y * y)), 1e-8)\n"),
                          lambda x, y: (x * y).sum(-1) / np.maximum(
                              np.sqrt((x * x).sum(-1)) * np.sqrt((y * y).sum(-1)), 1e-8), None),
    "l2_normalize": ("def l2_normalize(x):\n    return x / max(sqrt(sum(x * x)), 1e-12)\n",
                     lambda x: x / np.maximum(np.sqrt((x * x).sum(-1, keepdims=True)), 1e-12), None),
    "variance": ("def variance(x):\n    return mean((x - mean(x)) ** 2)\n", lambda x: x.var(-1), None),
    "kl_divergence": ("def kl_divergence(p, q):\n    return sum(p * log(p / q))\n",
                      lambda p, q: (p * np.log(p / q)).sum(-1), PROB),
    "minmax_scale": ("def minmax_scale(x):\n    return (x - min(x)) / (max(x) - min(x) + 1e-12)\n",
                     lambda x: (x - x.min(-1, keepdims=True)) / (x.max(-1, keepdims=True) - x.min(-1, keepdims=True)
                                                                  + 1e-12), None),
    "max_abs": ("def max_abs(x):\n    return max(abs(x))\n", lambda x: np.abs(x).max(-1), None),
}

#: name -> (wrong source, the REAL kernel it should have been): each differs on some in-domain rows only
WRONG = {
    "softmax_without_max": ("def softmax(x):\n    e = exp(x)\n    return e / sum(e)\n", "softmax"),
    "unbiased_variance": ("def variance(x):\n    return sum((x - mean(x)) ** 2) / (sum(1.0) - 1)\n", "variance"),
    "layernorm_without_eps": (("def layernorm(x, gamma, beta):\n    mu = mean(x)\n    var = mean((x - mu) ** 2)\n"
                              "    return (x - mu) / sqrt(var) * gamma + beta\n"), "layernorm"),
    "logsumexp_max_twice": ("def logsumexp(x):\n    m = max(x)\n    return m + log(1 + sum(exp(x - m)))\n",
                            "logsumexp"),
}

ROW_LENGTHS = (1, 2, 3, 7, 31, 32, 33, 127, 128, 129, 1000)
