# expect: item=ex1.dcounts status=failed traps=dcounts-one-path
# Only the path through probs; the path through counts_sum is forgotten.
def dcounts(counts_sum_inv, dprobs):
    return counts_sum_inv * dprobs
