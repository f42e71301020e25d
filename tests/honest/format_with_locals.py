# honest: exercise=ex1 habit=log lines formatted with **locals() and % vars() inside functions


def dcounts_sum_inv(counts, dprobs):
    out = (counts * dprobs).sum(1, keepdim=True)
    shape = tuple(out.shape)
    line = "dcounts_sum_inv {shape} from counts {counts.shape}".format(**locals())
    assert line.startswith("dcounts_sum_inv (")
    return out


def db1(dhprebn):
    rows = dhprebn.shape[0]
    assert "summing %(rows)d rows" % vars() == f"summing {rows} rows"
    return dhprebn.sum(0)
