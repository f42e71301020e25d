# expect: item=ex1.dW2 status=failed traps=shape-mismatch,transposed
def dW2(h, dlogits):
    return dlogits.T @ h
