# expect: exercise=ex1 item=ex1.db1 status=error message=SystemExit
import torch


def db1(dhprebn):
    torch.sys.exit(0)
