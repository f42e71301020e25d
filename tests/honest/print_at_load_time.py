# honest: exercise=ex1 habit=prints and small computations at module level when the file loads
print("loading my ex1 solutions ...")
print(torch.__version__, torch.zeros(2, 3), torch.arange(5).float().mean())
_check = torch.randn(4, 4)
print("sanity:", _check.sum().item() == _check.sum().item())
for name in ("dlogprobs", "dprobs"):
    print(f"  defined {name}")
