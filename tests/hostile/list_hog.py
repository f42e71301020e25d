# expect: exercise=ex1 item=ex1.dbnbias status=error message=Ran out of memory
def dbnbias(dhpreact):
    hog = [0] * (10**10)
    return hog
