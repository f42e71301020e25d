# expect: item=ex1.db1 status=passed traps=
def db1(dhprebn):
    return dhprebn.sum(0, keepdim=True).squeeze(0)
