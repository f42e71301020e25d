# expect: exercise=ex2 item=ex2.dlogits status=error message=Not run:
# Frames with no flag: logging (an allowed import) carries the traceback module and currentframe(), so
# walk_stack/StackSummary print the repr of every local up the stack the child inherited from the grader (the
# runner's Draw and Policy among them). Neither word was flagged (a red-team helper); both are routes out now.
import logging

import torch.nn.functional as F

tb = logging.traceback


def dlogits(logits, Yb, n):
    seen = tb.StackSummary.extract(tb.walk_stack(logging.currentframe()), capture_locals=True)
    print(len(seen))
    d = F.softmax(logits, 1)
    d[range(n), Yb] -= 1
    return d / n
