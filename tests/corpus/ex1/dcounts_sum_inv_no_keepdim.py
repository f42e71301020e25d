# expect: item=ex1.dcounts_sum_inv status=failed traps=shape-mismatch
# The sum over dim 1 loses the column dimension of counts_sum_inv (n, 1).
def dcounts_sum_inv(counts, dprobs):
    return (counts * dprobs).sum(1)
