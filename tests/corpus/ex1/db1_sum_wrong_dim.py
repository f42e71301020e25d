# expect: item=ex1.db1 status=failed traps=shape-mismatch
# Summed over dim 1, across the hidden units, instead of over the batch.
def db1(dhprebn):
    return dhprebn.sum(1)
