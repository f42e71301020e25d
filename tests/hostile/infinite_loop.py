# expect: exercise=ex1 item=ex1.dC status=timeout message=Timed out
def dC(C):
    while True:
        pass
