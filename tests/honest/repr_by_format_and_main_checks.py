# honest: exercise=ex2 habit=a helper class whose __repr__ uses str.format, and test code under __main__ that inspects itself
import torch
import torch.nn.functional as F


class Saved:
    """Keeps what the backward pass needs."""

    def __init__(self, n):
        self._n = n
        self.probs = None

    def __repr__(self):
        return "{0.__class__.__name__}(n={0._n}, probs={1})".format(self, None if self.probs is None else "set")


def dlogits(logits, Yb, n):
    saved = Saved(n)
    saved.probs = F.softmax(logits, 1)
    d = saved.probs.clone()
    d[range(n), Yb] -= 1
    return d / n


if __name__ == "__main__":  # never runs when the grader loads this file
    import traceback

    failures = []
    try:
        print(dlogits.__code__.co_varnames[: dlogits.__code__.co_argcount])
        logits = torch.randn(4, 27)
        print(dlogits(logits, torch.tensor([0, 1, 2, 3]), 4).sum(1))
    except Exception as e:  # noqa: BLE001
        failures.append({"error": str(e), "traceback": traceback.format_exc(), "tb": e.__traceback__})
    print(failures or "ok")
