# expect: exercise=ex3 item=ex3.dhprebn status=timeout message=loading ex3.py
while True:
    pass
