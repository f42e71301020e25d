# expect: item=ex1.db1 status=failed traps=shape-mismatch
# keepdim=True keeps a (1, n_hidden) row where b1 is (n_hidden,).
def db1(dhprebn):
    return dhprebn.sum(0, keepdim=True)
