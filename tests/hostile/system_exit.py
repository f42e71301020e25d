# expect: exercise=ex1 item=ex1.dW1 status=error message=SystemExit
def dW1(embcat, dhprebn):
    raise SystemExit(3)
