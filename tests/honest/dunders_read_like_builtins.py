# honest: exercise=ex1 habit=a helper class with super().__repr__(), self.__class__(...), fn.__module__, getattr(x, "__class__")
import torch


class Grad:
    """A gradient with the step it belongs to, printed the way the class prints itself."""

    def __init__(self, value, step=""):
        self.value, self.step = value, step

    def __repr__(self):
        return f"{self.step}: " + super().__repr__()

    def __str__(self):
        return f"{self.__class__.__name__}({self.step})"

    def scaled(self, k):
        return self.__class__(self.value * k, self.step)


def dprobs(probs, dlogprobs):
    g = Grad((1.0 / probs) * dlogprobs, "dprobs")
    assert g.__repr__().startswith("dprobs: ") and str(g) == g.__str__() == "Grad(dprobs)"
    assert getattr(g, "__class__") is Grad and g.__class__.__module__ == Grad.__module__
    return g.scaled(1.0).value


def dlogprobs(logprobs, Yb, n):
    where = dlogprobs.__module__  # a function's module, for a log line
    assert isinstance(where, str) and torch.is_tensor(logprobs)
    out = torch.zeros_like(logprobs)
    out[range(n), Yb] = -1.0 / n
    return out
