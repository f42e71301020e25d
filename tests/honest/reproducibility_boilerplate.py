# honest: exercise=ex4 habit=reproducibility boilerplate at the top: deterministic algorithms, default device and dtype
torch.use_deterministic_algorithms(True)
torch.set_default_device("cpu")
torch.set_default_dtype(torch.float32)
