# expect: item=ex1.dprobs status=failed traps=mutates-input
def dprobs(probs, dlogprobs):
    dlogprobs /= probs
    return dlogprobs
