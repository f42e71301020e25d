# expect: item=ex1.dbngain status=failed traps=shape-mismatch
# A mean over dim 1 with keepdim=True: (32, 1) where bngain is (1, 64).
def dbngain(bnraw, dhpreact):
    return (bnraw * dhpreact).mean(1, keepdim=True)
