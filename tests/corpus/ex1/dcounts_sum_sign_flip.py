# expect: item=ex1.dcounts_sum status=failed traps=sign-flip
# d/dx x**-1 is -x**-2; the minus is lost.
def dcounts_sum(counts_sum, dcounts_sum_inv):
    return counts_sum**-2 * dcounts_sum_inv
