# expect: item=ex2.dlogits status=failed traps=mutates-input
# Right value, but the softmax is done in place on the grader's logits.
def dlogits(logits, Yb, n):
    p = logits
    p -= p.max(1, keepdim=True).values
    p.exp_()
    p /= p.sum(1, keepdim=True)
    p[range(n), Yb] -= 1
    return p / n
