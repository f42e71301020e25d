# expect: exercise=ex1 item=ex1.dlogits status=error message=File too large
def dlogits(dnorm_logits):
    line = "x" * 1_000_000
    for _ in range(500):
        print(line)
    return dnorm_logits.clone()
