# expect: item=ex1.dhprebn status=failed traps=dhprebn-one-path
# Only the path through bndiff; the path through bnmeani is forgotten.
def dhprebn(dbndiff):
    return dbndiff.clone()
