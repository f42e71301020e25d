# expect: exercise=ex1 item=ex1.dlogprobs status=error message=RuntimeError
# A lone surrogate in a message: every UTF-8 file it reaches (report.html) would refuse it and end the run.
def dlogprobs(logprobs):
    raise RuntimeError(chr(0xDC80) + " and " + chr(0xD800))
