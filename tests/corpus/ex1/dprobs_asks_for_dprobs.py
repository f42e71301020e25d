# expect: item=ex1.dprobs status=error traps=
# Asks for its own gradient.
def dprobs(probs, dlogprobs, dprobs):
    return (1.0 / probs) * dlogprobs
