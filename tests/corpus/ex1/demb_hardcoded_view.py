# expect: item=ex1.demb status=failed traps=hardcoded-size
def demb(dembcat):
    return dembcat.view(32, 3, 10)
