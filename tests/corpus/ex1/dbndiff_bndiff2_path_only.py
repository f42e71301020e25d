# expect: item=ex1.dbndiff status=failed traps=dbndiff-one-path
# Only the path through bndiff2; the path through bnraw is forgotten.
def dbndiff(bndiff, dbndiff2):
    local = 2.0 * bndiff
    return local * dbndiff2
