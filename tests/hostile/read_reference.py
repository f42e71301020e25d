# expect: exercise=ex3 item=ex3.dhprebn status=error message=NameError
def dhprebn(dhpreact):
    return open("reference/ex3.py").read()
