# honest: exercise=ex1 habit=torch.no_grad() blocks and decorators, inference_mode


@torch.no_grad()
def dbngain(bnraw, dhpreact):
    return (bnraw * dhpreact).sum(0, keepdim=True)


@torch.no_grad
def dbnraw(bngain, dhpreact):
    return bngain * dhpreact


def db1(dhprebn):
    with torch.no_grad():
        d = dhprebn.sum(0)
    return d


@torch.inference_mode()
def dlogit_maxes(dnorm_logits):
    with torch.inference_mode():
        return (-dnorm_logits).sum(1, keepdim=True)


def dcounts_sum_inv(counts, dprobs):
    with torch.set_grad_enabled(False):
        return (counts * dprobs).sum(1, keepdim=True)
