# expect: item=ex1.dbnraw status=failed traps=missing-factor
# hpreact = bngain * bnraw + bnbias: the factor bngain is dropped.
def dbnraw(dhpreact):
    return dhpreact.clone()
