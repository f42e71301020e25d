# honest: exercise=ex1 habit=computing in float64 inside and casting back with .float() / .to(dtype)


def dbnvar_inv(bndiff, dbnraw):
    d = (bndiff.double() * dbnraw.double()).sum(0, keepdim=True)
    return d.to(dbnraw.dtype)


def dprobs(probs, dlogprobs):
    return (dlogprobs.double() / probs.double()).float()
