# expect: item=ex1.dlogits status=passed traps=dlogits-max-broadcast
# The logit_maxes path is added to every entry of the row instead of at its argmax.
def dlogits(dnorm_logits, dlogit_maxes):
    return dnorm_logits + dlogit_maxes
