# expect: item=ex1.dbnmeani status=passed traps=
def dbnmeani(dbndiff):
    return -dbndiff.sum(0).unsqueeze(0)
