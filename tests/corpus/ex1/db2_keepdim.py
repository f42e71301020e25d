# expect: item=ex1.db2 status=failed traps=shape-mismatch
# keepdim=True gives (1, vocab) where b2 is (vocab,).
def db2(dlogits):
    return dlogits.sum(0, keepdim=True)
