# expect: item=ex1.dhpreact status=failed traps=tanh-preact
# The tanh derivative written with the input instead of the output.
def dhpreact(hpreact, dh):
    return (1 - hpreact**2) * dh
