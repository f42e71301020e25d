# expect: exercise=ex1 item=ex1.dbnvar status=error message=Returned a NoneType
def dbnvar(bnvar):
    pass
