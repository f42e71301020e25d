# expect: item=ex1.dhprebn status=failed traps=mutates-input
def dhprebn(dbndiff, dbnmeani, n):
    dbndiff += dbnmeani / n
    return dbndiff
