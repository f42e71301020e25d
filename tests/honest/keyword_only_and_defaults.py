# honest: exercise=ex1 habit=keyword-only parameters and default arguments for unused parameters


def dh(*, dlogits, W2):
    return dlogits @ W2.T


def db2(dlogits, *, keepdim=False, verbose=False, debug: bool = False):
    if verbose or debug:
        print("db2")
    return dlogits.sum(0, keepdim=keepdim)


def dW2(h, dlogits, W2=None, b2=None, logits=None):
    return h.T @ dlogits
