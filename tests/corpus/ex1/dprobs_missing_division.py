# expect: item=ex1.dprobs status=failed traps=missing-factor
# d log(x)/dx = 1/x is forgotten: the result is the true gradient times probs.
def dprobs(dlogprobs):
    return dlogprobs.clone()
