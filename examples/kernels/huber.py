def huber(r, d):
    a = abs(r)
    quad = 0.5 * r * r
    lin = d * (a - 0.5 * d)
    return where(a <= d, quad, lin)
