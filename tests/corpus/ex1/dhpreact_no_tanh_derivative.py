# expect: item=ex1.dhpreact status=failed traps=missing-factor
# The gradient is passed through tanh as if it were the identity.
def dhpreact(dh):
    return dh.clone()
