# expect: item=ex1.dbnmeani status=failed traps=shape-mismatch
# The lecture's line: sum(0) without keepdim gives (n_hidden,) where bnmeani is (1, n_hidden).
def dbnmeani(dbndiff):
    return -dbndiff.sum(0)
