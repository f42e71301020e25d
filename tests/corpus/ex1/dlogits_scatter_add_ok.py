# expect: item=ex1.dlogits status=passed traps=
# The max path routed with scatter_add_ at each row's argmax.
def dlogits(logits, dnorm_logits, dlogit_maxes):
    d = dnorm_logits.clone()
    d.scatter_add_(1, logits.argmax(1, keepdim=True), dlogit_maxes)
    return d
