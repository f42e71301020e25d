# expect: item=ex1.dh status=failed traps=sign-flip
def dh(W2, dlogits):
    return -(dlogits @ W2.T)
