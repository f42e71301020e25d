# expect: exercise=ex1 item=ex1.dbnvar status=error message=Returned a list
def dbnvar(bnvar):
    return [0.0] * bnvar.shape[1]
