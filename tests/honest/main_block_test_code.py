# honest: exercise=ex1 habit=if __name__ == "__main__": test code at the bottom, comparing with autograd (lecture's cmp)
import logging

log = logging.getLogger(__name__)  # reads __name__: the block below still never runs when graded


def cmp(s, dt, t):
    ex = torch.all(dt == t.grad).item()
    app = torch.allclose(dt, t.grad)
    maxdiff = (dt - t.grad).abs().max().item()
    print(f"{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | maxdiff: {maxdiff}")


if __name__ == "__main__":
    import time

    import matplotlib.pyplot as plt

    g = torch.Generator().manual_seed(2147483647)
    n, vocab = 32, 27
    logits = torch.randn(n, vocab, generator=g, requires_grad=True)
    Yb = torch.randint(0, vocab, (n,), generator=g)
    probs = F.softmax(logits, 1)
    probs.retain_grad()
    logprobs = probs.log()
    logprobs.retain_grad()
    loss = -logprobs[range(n), Yb].mean()
    t0 = time.perf_counter()
    loss.backward()
    cmp("logprobs", dlogprobs(logprobs.detach(), Yb, n), logprobs)
    cmp("probs", dprobs(probs.detach(), logprobs.grad), probs)
    print(f"checked in {time.perf_counter() - t0:.3f}s")
    print("defined:", sorted(k for k in globals() if k.startswith("d")))
    plt.imshow(logits.grad.detach(), cmap="gray")
    plt.show()
