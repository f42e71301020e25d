# honest: exercise=ex1 habit=**kwargs and *args beside named parameters, for the student's own loop that passes every input


def dcounts_sum_inv(counts, dprobs, **unused):
    return (counts * dprobs).sum(1, keepdim=True)


def dbnbias(dhpreact, *rest, **options):
    assert not rest and not options  # the grader passes only the named inputs
    return dhpreact.sum(0, keepdim=True)


if __name__ == "__main__":
    inputs = {}  # in the notebook: every forward tensor and gradient, by name
    grads = {name: fn(**inputs) for name, fn in [("dcounts_sum_inv", dcounts_sum_inv), ("dbnbias", dbnbias)]}
