# expect: item=ex1.dbndiff status=failed traps=dbndiff-one-path
# Only the path through bnraw; the path through bndiff2 (the variance) is forgotten.
def dbndiff(bnvar_inv, dbnraw):
    return dbnraw * bnvar_inv
