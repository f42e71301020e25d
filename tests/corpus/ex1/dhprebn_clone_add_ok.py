# expect: item=ex1.dhprebn status=passed traps=
def dhprebn(dbndiff, dbnmeani, n):
    g = dbndiff.clone()
    g.add_(dbnmeani.expand_as(g), alpha=1.0 / n)
    return g
