# expect: item=ex1.dbndiff2 status=failed traps=bessel
def dbndiff2(bndiff2, dbnvar):
    batch = bndiff2.shape[0]
    return dbnvar.expand_as(bndiff2) / batch
