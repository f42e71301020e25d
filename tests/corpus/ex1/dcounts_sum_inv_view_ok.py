# expect: item=ex1.dcounts_sum_inv status=passed traps=
# sum(1) then view(-1, 1): no keepdim, but the shape (n, 1) is restored.
def dcounts_sum_inv(counts, dprobs):
    return (counts * dprobs).sum(1).view(-1, 1)
