# expect: exercise=ex3 item=ex3.dhprebn status=error message=Operation not permitted
import torch


def dhprebn(dhpreact):
    builtins = torch.sys.modules["builtins"]
    return builtins.open("/work/main/reference/ex3.py").read()
