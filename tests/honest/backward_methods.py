# honest: exercise=ex1 habit=methods and functions named *_backward


def linear_backward(dout, x, W):
    """dx, dW of out = x @ W."""
    return dout @ W.T, x.T @ dout


class Tanh:
    def __init__(self, out):
        self.out = out

    def tanh_backward(self, dout):
        return (1.0 - self.out**2) * dout

    def backward(self, dout):
        return self.tanh_backward(dout)


class Linear:
    def __init__(self, W):
        self.W = W

    def linear_backward(self, dout):
        return dout @ self.W.T


def dhpreact(h, dh):
    layer = Tanh(h)
    via_method = layer.tanh_backward(dh)
    assert torch.equal(via_method, layer.backward(dh))
    return via_method


def dembcat(W1, dhprebn):
    return Linear(W1).linear_backward(dhprebn)


def dW2(h, dlogits, W2):
    _, dW = linear_backward(dlogits, h, W2)
    return dW
